package ingest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-dev/weir/internal/clickhouse"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/sink/kafka"
	"github.com/weir-dev/weir/internal/wire"
)

const topic = "weir-flows"

// fakeCH is a ClickHouse HTTP interface that takes INSERTs of wire rows
// and counts them per record (Packets is the record's number); refuse
// makes it answer 500 to that many data inserts first, drop close the
// connection of that many without an answer. It keeps weir ingest's
// offsets table too (the highest offset per group, topic and partition)
// and answers SELECT version() and the offsets' SELECT.
type fakeCH struct {
	mu      sync.Mutex
	got     map[uint64]int
	inserts int
	refuse  atomic.Int64
	drop    atomic.Int64
	noMarks atomic.Int64 // refuse this many offsets inserts
	queries []string
	marks   map[string]map[int32]int64 // group + "/" + topic → partition → offset
	loads   int
}

func newFakeCH(t *testing.T) (*fakeCH, string) {
	f := &fakeCH{got: map[uint64]int{}, marks: map[string]map[int32]int64{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("query")
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		switch {
		case q == "" && strings.HasPrefix(string(body), "SELECT version()"):
			w.Write(append([]byte{8}, "24.8.4.1"...))
			return
		case q == "" && strings.Contains(string(body), " FROM weir."+clickhouse.TableOffsets+" "):
			f.mu.Lock()
			defer f.mu.Unlock()
			f.loads++
			var out []byte
			for p, o := range f.marks[r.URL.Query().Get("param_p0")+"/"+r.URL.Query().Get("param_p1")] {
				out = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint32(out, uint32(p)), uint64(o))
			}
			w.Write(out)
			return
		case strings.HasPrefix(q, "INSERT INTO weir."+clickhouse.TableOffsets+" ") && f.noMarks.Load() > 0:
			f.noMarks.Add(-1)
			http.Error(w, "Code: 60, e.displayText() = DB::Exception: Table weir.ingest_offsets doesn't exist", 404)
			return
		case strings.HasPrefix(q, "INSERT INTO weir."+clickhouse.TableOffsets+" "):
			f.mu.Lock()
			defer f.mu.Unlock()
			for b := body; len(b) > 0; {
				var s [2]string
				for i := range s {
					n := int(b[0]) // short names: one byte of length
					s[i], b = string(b[1:1+n]), b[1+n:]
				}
				p, o := int32(binary.LittleEndian.Uint32(b)), int64(binary.LittleEndian.Uint64(b[4:]))
				b = b[16:]
				k := s[0] + "/" + s[1]
				if f.marks[k] == nil {
					f.marks[k] = map[int32]int64{}
				}
				f.marks[k][p] = max(f.marks[k][p], o)
			}
			return
		case q == "":
			http.Error(w, "Code: 62, e.displayText() = DB::Exception: Syntax error", 400)
			return
		}
		if f.drop.Load() > 0 {
			f.drop.Add(-1)
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		if f.refuse.Load() > 0 {
			f.refuse.Add(-1)
			http.Error(w, "Code: 252, e.displayText() = DB::Exception: Too many parts", 500)
			return
		}
		var rec flow.Record
		f.mu.Lock()
		defer f.mu.Unlock()
		f.queries = append(f.queries, q)
		for b := body; len(b) > 0; {
			if b, err = wire.Decode(b, &rec); err != nil {
				http.Error(w, "Cannot parse input: "+err.Error(), 400)
				return
			}
			f.got[rec.Packets]++
		}
		f.inserts++
	}))
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *fakeCH) count() (records, total int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.got {
		total += n
	}
	return len(f.got), total
}

func records(from, n int) []flow.Record {
	out := make([]flow.Record, n)
	for i := range out {
		r := &out[i]
		k := from + i
		r.Key.SetSrc(netip.AddrFrom4([4]byte{10, 0, byte(k >> 8 % 4), byte(k % 64)}))
		r.Key.SetDst(netip.AddrFrom4([4]byte{10, 1, 0, 1}))
		r.Key.SrcPort, r.Key.DstPort, r.Key.Proto = 40000, 443, flow.ProtoTCP
		r.Packets, r.Bytes, r.Start, r.End, r.Iface, r.Node = uint64(k), 100, int64(k), int64(k), "eth0", "n"
	}
	return out
}

// produce sends recs through the real sink in the URL's format.
func produce(t *testing.T, addr, opts string, recs []flow.Record) {
	t.Helper()
	cfg, err := kafka.ParseURL("kafka://" + addr + "/" + topic + opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := kafka.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Write(recs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func newIngest(t *testing.T, addr, chURL, group string, batchRows int) *Ingest {
	t.Helper()
	kc, err := kafka.ParseURL("kafka://" + addr + "/" + topic)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := clickhouse.NewHTTP(chURL, "", "")
	if err != nil {
		t.Fatal(err)
	}
	in, err := New(Config{Kafka: kc, Group: group, ClickHouse: conn, URL: chURL, BatchRows: batchRows, BatchDelay: 50 * time.Millisecond, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// waitFor waits (bounded) until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 60 s for %s", what)
		}
	}
}

// ingestUntil starts an ingest of group and waits until the fake
// ClickHouse holds n distinct records; the ingest is left running.
func ingestUntil(t *testing.T, addr string, ch *fakeCH, chURL, group string, batchRows, n int) *Ingest {
	t.Helper()
	in := newIngest(t, addr, chURL, group, batchRows)
	in.Start(context.Background())
	waitFor(t, fmt.Sprintf("%d records", n), func() bool { got, _ := ch.count(); return got >= n })
	return in
}

func stop(t *testing.T, in *Ingest) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := in.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// newCluster starts a one-broker kfake cluster with the topic's 4
// partitions, closed when the test ends.
func newCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestIngest: packed and one-row messages are inserted, every record
// once, into weir.flows_input; messages that are not weir's are skipped
// and counted by reason; the offsets are committed, so a second ingest of
// the group inserts nothing again.
func TestIngest(t *testing.T) {
	c := newCluster(t)
	addr := c.ListenAddrs()[0]
	ch, chURL := newFakeCH(t)
	produce(t, addr, "", records(0, 3000))              // packed
	produce(t, addr, "?format=row", records(3000, 500)) // one row a message
	good := wire.Append(nil, &records(9000, 1)[0])
	bad := []*kgo.Record{
		{Value: good}, // no header
		{Value: good, Headers: hdr("rowbinary/2")},                           // header
		{Value: good, Headers: hdr("rowbinary/1;rows=2")},                    // rows
		{Value: good[:len(good)-1], Headers: hdr("rowbinary/1")},             // malformed
		{Value: append([]byte{2}, good[1:]...), Headers: hdr("rowbinary/1")}, // version
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, bad...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	in := newIngest(t, addr, chURL, "g1", 1000)
	in.Start(context.Background())
	waitFor(t, "3,500 records", func() bool { n, _ := ch.count(); return n >= 3500 })
	waitFor(t, "5 skipped", func() bool {
		st := in.Stats()
		return st.Skipped["header"] == 2 && st.Skipped["rows"] == 1 && st.Skipped["malformed"] == 1 && st.Skipped["version"] == 1
	})
	stop(t, in)
	if n, total := ch.count(); n != 3500 || total != 3500 {
		t.Fatalf("%d records inserted, %d times in all; want 3500 once each", n, total)
	}
	st := in.Stats()
	if st.Rows != 3500 || st.Buffered != 0 || st.Commits == 0 || st.InsertErrors["refused"]+st.InsertErrors["unreachable"] != 0 ||
		st.Replayed != 0 || st.OffsetLoads == 0 {
		t.Errorf("stats %+v", st)
	}
	for _, q := range ch.queries {
		if q != "INSERT INTO weir.flows_input FORMAT RowBinary" {
			t.Fatalf("query %q", q)
		}
	}
	// The group's offsets are committed: a new ingest of it finds nothing.
	in2 := newIngest(t, addr, chURL, "g1", 1000)
	in2.Start(context.Background())
	produce(t, addr, "", records(5000, 10))
	waitFor(t, "the 10 new records", func() bool { n, _ := ch.count(); return n >= 3510 })
	stop(t, in2)
	if n, total := ch.count(); n != 3510 || total != 3510 {
		t.Fatalf("after a restart of the group: %d records, %d inserts of them", n, total)
	}
}

func hdr(v string) []kgo.RecordHeader {
	return []kgo.RecordHeader{{Key: wire.SchemaHeader, Value: []byte(v)}}
}

// TestRetry: while ClickHouse refuses or is unreachable, the batch is
// retried and nothing is committed: an ingest stopped then leaves every
// row to the group, and the next one inserts them all, once.
func TestRetry(t *testing.T) {
	c := newCluster(t)
	addr := c.ListenAddrs()[0]
	produce(t, addr, "", records(0, 2000))

	// A closed port first: the offsets already inserted cannot be read,
	// so nothing is taken.
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	in := newIngest(t, addr, closedURL, "g", 100000)
	in.Start(context.Background())
	waitFor(t, "unreachable errors", func() bool { return in.Stats().OffsetErrors["unreachable"] >= 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err := in.Stop(ctx)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "could not read the offsets already inserted") {
		t.Fatalf("Stop while the server is away: %v", err)
	}
	if st := in.Stats(); st.Commits != 0 || st.Rows != 0 || st.Messages != 0 {
		t.Fatalf("took, committed or counted rows with the marks unknown: %+v", st)
	}

	// A server whose inserts get no answer: the batch waits.
	lost, lostURL := newFakeCH(t)
	lost.drop.Store(1 << 30)
	in = newIngest(t, addr, lostURL, "g", 100000)
	in.Start(context.Background())
	waitFor(t, "unreachable inserts", func() bool { return in.Stats().InsertErrors["unreachable"] >= 2 })
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	err = in.Stop(ctx)
	cancel()
	if err == nil || !strings.Contains(err.Error(), " rows were not inserted") || strings.Contains(err.Error(), ": 0 rows") { // the batch holds what the polls brought
		t.Fatalf("Stop while the inserts get no answer: %v", err)
	}
	if st := in.Stats(); st.Commits != 0 || st.Rows != 0 {
		t.Fatalf("committed or counted rows not inserted: %+v", st)
	}

	// A server that refuses three times, then takes them.
	ch, chURL := newFakeCH(t)
	ch.refuse.Store(3)
	in = newIngest(t, addr, chURL, "g", 100000)
	in.Start(context.Background())
	waitFor(t, "2,000 records", func() bool { n, _ := ch.count(); return n >= 2000 })
	stop(t, in)
	if n, total := ch.count(); n != 2000 || total != 2000 {
		t.Fatalf("%d records, %d inserted in all; want 2000 once each", n, total)
	}
	if st := in.Stats(); st.InsertErrors["refused"] != 3 || st.Rows != 2000 {
		t.Errorf("stats %+v", st)
	}
}

// TestStopFlushes: Stop inserts and commits the batch being filled (a
// long batch delay would hold it otherwise).
func TestStopFlushes(t *testing.T) {
	c := newCluster(t)
	addr := c.ListenAddrs()[0]
	ch, chURL := newFakeCH(t)
	produce(t, addr, "", records(0, 700))
	kc, _ := kafka.ParseURL("kafka://" + addr + "/" + topic)
	conn, _ := clickhouse.NewHTTP(chURL, "", "")
	in, err := New(Config{Kafka: kc, ClickHouse: conn, URL: chURL, BatchDelay: 10 * time.Minute, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	in.Start(context.Background())
	waitFor(t, "700 rows buffered", func() bool { return in.Stats().Buffered == 700 })
	if n, _ := ch.count(); n != 0 {
		t.Fatalf("%d rows inserted before the batch was due", n)
	}
	stop(t, in)
	if n, total := ch.count(); n != 700 || total != 700 || in.Stats().Commits != 1 {
		t.Fatalf("after Stop: %d records, %d in all, stats %+v", n, total, in.Stats())
	}
}

// TestConfig: mistakes are ErrConfig.
func TestConfig(t *testing.T) {
	kc, _ := kafka.ParseURL("kafka://127.0.0.1:1/t")
	conn, _ := clickhouse.NewHTTP("http://127.0.0.1:1", "", "")
	for _, c := range []Config{
		{},
		{Kafka: kc, ClickHouse: conn, Database: "a;b"},
		{Kafka: kc, ClickHouse: conn, BatchBytes: 1000},
		{Kafka: kc, ClickHouse: conn, BatchRows: -1},
		{Kafka: kc, ClickHouse: conn, BatchDelay: time.Hour},
	} {
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// FuzzCheck: any headers and value are skipped with a reason, or are
// exactly the rows the header names, each of which decodes.
func FuzzCheck(f *testing.F) {
	row := wire.Append(nil, &records(1, 1)[0])
	f.Add("rowbinary/1", row)
	f.Add("rowbinary/1;rows=2", append(append([]byte{}, row...), row...))
	f.Add("rowbinary/1;rows=1", row[:10])
	f.Fuzz(func(t *testing.T, h string, v []byte) {
		rows, reason, err := Check(&kgo.Record{Value: v, Headers: hdr(h)})
		if reason >= 0 {
			if err == nil || reason >= numSkip || rows != 0 {
				t.Fatalf("skipped (%d) with %v, %d rows", reason, err, rows)
			}
			return
		}
		var rec flow.Record
		for i := range rows {
			if v, err = wire.Decode(v, &rec); err != nil {
				t.Fatalf("row %d of %d: %v", i, rows, err)
			}
		}
		if len(v) != 0 {
			t.Fatalf("%d bytes after %d rows", len(v), rows)
		}
	})
}

// TestGroupShares: two ingests of one group share the topic's partitions
// (both insert rows), and across their joining and leaving every record is
// inserted exactly once.
func TestGroupShares(t *testing.T) {
	c := newCluster(t)
	addr := c.ListenAddrs()[0]
	ch, chURL := newFakeCH(t)
	a := newIngest(t, addr, chURL, "shared", 500)
	a.Start(context.Background())
	b := newIngest(t, addr, chURL, "shared", 500)
	b.Start(context.Background())
	sent := 0
	for deadline := time.Now().Add(60 * time.Second); a.Stats().Rows == 0 || b.Stats().Rows == 0; sent += 1000 {
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s one ingest of the group inserted nothing: %d and %d rows", a.Stats().Rows, b.Stats().Rows)
		}
		produce(t, addr, "", records(sent, 1000))
		time.Sleep(50 * time.Millisecond)
	}
	waitFor(t, "every record", func() bool { n, _ := ch.count(); return n >= sent })
	stop(t, a)
	stop(t, b)
	n, total := ch.count()
	if n != sent || total != sent {
		t.Fatalf("%d of %d records inserted, %d times in all", n, sent, total)
	}
	t.Logf("%d records; %d and %d rows by each ingest, %d and %d messages replayed", sent, a.Stats().Rows, b.Stats().Rows, a.Stats().Replayed, b.Stats().Replayed)
}
