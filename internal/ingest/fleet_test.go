package ingest

import (
	"bufio"
	"context"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/clickhouse"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/sink/kafka"
	"github.com/weir-dev/weir/internal/testfleet"
)

const fleetFlows = 1000

// fleetRecords are records from..from+n of fleetFlows flows: record k is
// of flow k % fleetFlows (its source port 40000+flow) with k bytes.
func fleetRecords(from, n int) []flow.Record {
	base := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	out := make([]flow.Record, n)
	for i := range out {
		k := from + i
		f := k % fleetFlows
		r := &out[i]
		*r = flow.Record{Packets: 1, Bytes: uint64(k), Start: base + int64(k)*int64(time.Millisecond), Iface: "eth0", Node: "node-" + strconv.Itoa(k%3)}
		r.End = r.Start
		r.Key.SetSrc(netip.AddrFrom4([4]byte{10, 0, byte(f >> 8), byte(f)}))
		r.Key.SetDst(netip.AddrFrom4([4]byte{10, 1, 0, 1}))
		r.Key.SrcPort, r.Key.DstPort, r.Key.Proto = uint16(40000+f), 443, flow.ProtoTCP
	}
	return out
}

// fleetWant is what flows holds per flow after records 0..n: count and bytes.
func fleetWant(n int) map[int][2]uint64 {
	w := map[int][2]uint64{}
	for k := range n {
		c := w[k%fleetFlows]
		w[k%fleetFlows] = [2]uint64{c[0] + 1, c[1] + uint64(k)}
	}
	return w
}

// fleetSetup makes a database of the test's own (no Kafka engine: weir
// ingest reads the topic) and a topic of 4 partitions.
type fleetRun struct {
	fl        *testfleet.Fleet
	db, topic string
	ch        *clickhouse.HTTP
	kc        *kafka.Config
	sink      *kafka.Sink
}

func newFleetRun(t *testing.T, fl *testfleet.Fleet, setup bool) *fleetRun {
	t.Helper()
	r := &fleetRun{fl: fl, db: fl.Database("ingest"), topic: testfleet.Unique("weir-ingest")}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	if r.kc, err = kafka.ParseURL("kafka://" + fl.Kafka + "/" + r.topic); err != nil {
		t.Fatal(err)
	}
	if _, err := kafka.EnsureTopic(ctx, r.kc, 4, 1); err != nil {
		t.Fatal(err)
	}
	if r.ch, err = clickhouse.NewHTTP(fl.ClickHouse, "", ""); err != nil {
		t.Fatal(err)
	}
	if setup {
		r.setup(t)
	}
	if r.sink, err = kafka.New(r.kc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.sink.Close() })
	return r
}

func (r *fleetRun) setup(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := clickhouse.Setup(ctx, r.ch, clickhouse.Config{Database: r.db}); err != nil {
		t.Fatal(err)
	}
}

func (r *fleetRun) ingest(t *testing.T, batchRows int) *Ingest {
	t.Helper()
	in, err := New(Config{Kafka: r.kc, Group: testfleet.Unique("ingest"), ClickHouse: r.ch, URL: r.fl.ClickHouse, Database: r.db,
		BatchRows: batchRows, BatchDelay: 200 * time.Millisecond, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	in.Start(context.Background())
	return in
}

// send writes records from..from+n through the packed sink, paced within
// its buffer, and waits until the broker has them all.
func (r *fleetRun) send(t *testing.T, from, n int, flush bool) {
	t.Helper()
	for i := from; i < from+n; i += 1000 {
		r.sink.Write(fleetRecords(i, min(1000, from+n-i)))
		for r.sink.Stats().Buffered > 1<<17 {
			time.Sleep(time.Millisecond)
		}
	}
	if flush {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := r.sink.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// query runs sql and returns its TabSeparated rows.
func (r *fleetRun) query(t *testing.T, sql string) [][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, err := r.ch.Do(ctx, strings.ReplaceAll(sql, "DB", r.db)+" FORMAT TabSeparated", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out [][]string
	sc := bufio.NewScanner(rc)
	for sc.Scan() {
		out = append(out, strings.Split(sc.Text(), "\t"))
	}
	return out
}

func (r *fleetRun) count(t *testing.T) int {
	t.Helper()
	n, _ := strconv.Atoi(r.query(t, "SELECT count() FROM DB.flows")[0][0])
	return n
}

// distinct is how many different records flows holds (each record's
// start is its own).
func (r *fleetRun) distinct(t *testing.T) int {
	t.Helper()
	n, _ := strconv.Atoi(r.query(t, "SELECT uniqExact(start_ns) FROM DB.flows")[0][0])
	return n
}

// check waits (bounded) until flows holds all n records, then checks them
// per flow: no record missing, every record exactly once (records and
// bytes per flow, and the rollups' totals).
func (r *fleetRun) check(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(4 * time.Minute); r.distinct(t) < n && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
	}
	time.Sleep(time.Second) // a doubled batch would land by now
	if got := r.distinct(t); got != n {
		t.Fatalf("%d of %d records in ClickHouse", got, n)
	}
	want := fleetWant(n)
	rows := r.query(t, "SELECT src_port - 40000, uniqExact(start_ns), count(), sum(bytes) FROM DB.flows GROUP BY src_port")
	if len(rows) != len(want) {
		t.Fatalf("%d flows in ClickHouse, want %d", len(rows), len(want))
	}
	for _, row := range rows {
		f, _ := strconv.Atoi(row[0])
		u, _ := strconv.ParseUint(row[1], 10, 64)
		c, _ := strconv.ParseUint(row[2], 10, 64)
		b, _ := strconv.ParseUint(row[3], 10, 64)
		w := want[f]
		if u != w[0] || c != w[0] || b != w[1] {
			t.Fatalf("flow %d: %d different records, %d in all, %d bytes; want %d, %d bytes", f, u, c, b, w[0], w[1])
		}
	}
	if got := r.count(t); got != n {
		t.Fatalf("%d rows for %d records", got, n)
	}
	for _, ru := range clickhouse.Rollups {
		if got := r.query(t, "SELECT sum(flows) FROM DB."+ru.Table)[0][0]; got != strconv.Itoa(n) {
			t.Errorf("%s: %s records, want %d", ru.Table, got, n)
		}
	}
}

// TestFleetIngest, on the real broker and ClickHouse: records the packed
// sink sends are all queryable through weir ingest, per flow exactly once
// (records and bytes), and in both rollups.
func TestFleetIngest(t *testing.T) {
	fl := testfleet.Start(t, testfleet.Kafka|testfleet.ClickHouse)
	r := newFleetRun(t, fl, true)
	in := r.ingest(t, 20000)
	const n = 100000
	start := time.Now()
	r.send(t, 0, n, true)
	r.check(t, n)
	t.Logf("%d records queryable %v after the first was sent", n, time.Since(start).Round(time.Millisecond))
	stopFleet(t, in)
	st := in.Stats()
	if st.Rows != n || st.Skipped["header"]+st.Skipped["rows"]+st.Skipped["malformed"]+st.Skipped["version"] != 0 {
		t.Errorf("stats %+v", st)
	}
}

func stopFleet(t *testing.T, in *Ingest) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := in.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFleetRestarts, on a fleet of its own: ClickHouse refusing (the
// tables do not exist yet), the broker stopped mid-stream and ClickHouse
// stopped while rows wait: weir ingest retries, commits nothing it did
// not insert, and every record ends up queryable exactly once, per flow
// (records and bytes) and in the rollups: across the broker's stop a
// consumer that lost its membership reads its uncommitted batch again and
// skips it (the marks in ingest_offsets).
func TestFleetRestarts(t *testing.T) {
	fl := testfleet.Start(t, testfleet.Kafka|testfleet.ClickHouse|testfleet.Private)
	r := newFleetRun(t, fl, false)
	in := r.ingest(t, 5000)
	defer stopFleet(t, in)
	waitFleet := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waited 3 min for %s: %+v", what, in.Stats())
			}
		}
	}
	// Refused: no tables yet (not even ingest_offsets, read first).
	r.send(t, 0, 10000, true)
	waitFleet("a refused read of the offsets", func() bool { return in.Stats().OffsetErrors["refused"] > 0 })
	r.setup(t)
	r.check(t, 10000)

	// The broker stops mid-stream: the sink buffers, the ingest's fetches
	// fail, its commits too. The consumer may lose its group membership
	// while the broker is away: it then reads again from the last commit,
	// and skips what it inserted since (weir_ingest_replayed_messages_total).
	r.send(t, 10000, 10000, false)
	fl.StopKafka()
	r.send(t, 20000, 10000, false)
	fl.StartKafka()
	r.send(t, 30000, 0, true)
	r.check(t, 30000)
	t.Logf("across the broker's stop: %d commit errors, %d messages replayed and skipped", in.Stats().CommitErrors, in.Stats().Replayed)

	// ClickHouse stops while nothing is in flight; rows wait in Kafka.
	waitFleet("an idle ingest", func() bool { st := in.Stats(); return st.Buffered == 0 && st.Rows >= 30000 })
	fl.StopClickHouse()
	r.send(t, 30000, 10000, true)
	waitFleet("an unreachable ClickHouse", func() bool {
		st := in.Stats()
		return st.InsertErrors["unreachable"]+st.OffsetErrors["unreachable"] > 0
	})
	fl.StartClickHouse()
	r.check(t, 40000)
	st := in.Stats()
	t.Logf("stats: %+v", st)
	if st.Rows != 40000 {
		t.Errorf("%d rows acknowledged, want 40000", st.Rows)
	}
	if d := r.sink.Stats().Dropped; d != [3]uint64{} {
		t.Errorf("the sink dropped %v", d)
	}
}
