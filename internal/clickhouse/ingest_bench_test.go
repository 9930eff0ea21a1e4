package clickhouse

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/sink/kafka"
	"github.com/weir-dev/weir/internal/testfleet"
)

// BenchmarkIngest measures what `weir clickhouse setup` builds — the
// server's Kafka engine reading the topic and the materialized views
// writing flows and the rollups — on the real broker and ClickHouse
// server (scripts/cluster.sh, or WEIR_FLEET's), in a database and topic of
// its own. The Kafka sink emits records paced at WEIR_INGEST_RATE
// records/s (default 200,000; 0: as fast as the sink takes them) for
// WEIR_INGEST_SECONDS (default 15), each stamped with its emission time
// (end_ns). Every 250 ms the benchmark counts, per 100 ms of emission time,
// the rows queryable in flows; a slice's records count as arrived when all
// of them are there, and their latency is that poll's time minus the
// slice's first emission (an upper bound: up to 100 ms + one poll late).
// It reports records/s end to end (records / (first emission → all
// queryable)), the emitting rate reached, p50/p99/max latency in ms, and
// fails if a record is missing or doubled, and the CPU the ClickHouse
// server and the broker spent per record meanwhile. Run it with -benchtime 1x.
func BenchmarkIngest(b *testing.B) {
	rate, secs := 200000.0, 15.0
	if v := os.Getenv("WEIR_INGEST_RATE"); v != "" {
		rate, _ = strconv.ParseFloat(v, 64)
	}
	if v := os.Getenv("WEIR_INGEST_SECONDS"); v != "" {
		secs, _ = strconv.ParseFloat(v, 64)
	}
	fl := testfleet.Start(b, testfleet.Kafka|testfleet.ClickHouse)
	for range b.N {
		ingestOnce(b, fl, rate, secs)
	}
}

func ingestOnce(b *testing.B, fl *testfleet.Fleet, rate, secs float64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	db, topic := "ingest_"+id, "weir-ingest-"+id
	kc, err := kafka.ParseURL("kafka://" + fl.Kafka + "/" + topic)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := kafka.EnsureTopic(ctx, kc, 4, 1); err != nil {
		b.Fatal(err)
	}
	c, err := NewHTTP(fl.ClickHouse, "", "")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := Setup(ctx, c, Config{Database: db, Kafka: kc.Brokers, Topic: topic, Group: "ingest-" + id}); err != nil {
		b.Fatal(err)
	}
	defer Exec(context.Background(), c, NewStmt(false).S("DROP DATABASE IF EXISTS ", db)) // stops its Kafka consumers
	s, err := kafka.New(kc)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()

	const slice = int64(100 * time.Millisecond)
	var mu sync.Mutex
	emitted := map[int64]int64{} // records per slice of emission time
	arrived := map[int64]time.Duration{}
	var lat []time.Duration // one per record
	recs := make([]flow.Record, 4096)
	for i := range recs {
		r := &recs[i]
		r.Key.SetSrc(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}))
		r.Key.SetDst(netip.AddrFrom4([4]byte{10, 1, 0, 1}))
		r.Key.SrcPort, r.Key.DstPort, r.Key.Proto = uint16(40000+i), 443, flow.ProtoTCP
		r.Packets, r.Bytes, r.Iface, r.Node = 1, 100, "eth0", "bench"
	}

	// The poller: counts per slice, from the oldest slice not yet complete.
	done := make(chan struct{})
	polled := make(chan error, 1)
	go func() {
		var err error
		defer func() { polled <- err }()
		for {
			select {
			case <-done:
				return
			case <-time.After(250 * time.Millisecond):
			}
			mu.Lock()
			oldest := int64(-1)
			for sl := range emitted {
				if _, ok := arrived[sl]; !ok && (oldest < 0 || sl < oldest) {
					oldest = sl
				}
			}
			mu.Unlock()
			if oldest < 0 {
				continue
			}
			got, qerr := sliceCounts(ctx, c, db, oldest, slice)
			now := time.Now()
			if qerr != nil {
				err = qerr
				return
			}
			mu.Lock()
			for sl, n := range got {
				if want, ok := emitted[sl]; ok && n >= want && now.UnixNano() > sl+slice {
					if _, seen := arrived[sl]; !seen {
						d := time.Duration(now.UnixNano() - sl)
						arrived[sl] = d
						for range n {
							lat = append(lat, d)
						}
					}
				}
			}
			mu.Unlock()
		}
	}()

	chCPU0, kCPU0 := serverCPU(b, fl)
	start := time.Now()
	var sent int64
	total := int64(rate * secs)
	if rate == 0 {
		total = int64(200000 * secs)
	}
	for sent < total {
		due := total
		if rate > 0 {
			due = min(int64(time.Since(start).Seconds()*rate), total)
		}
		for sent < due {
			n := min(int64(len(recs)), due-sent)
			now := time.Now().UnixNano()
			for i := range recs[:n] {
				recs[i].Start, recs[i].End = now, now
			}
			mu.Lock()
			emitted[now/slice*slice] += n
			mu.Unlock()
			s.Write(recs[:n])
			sent += n
			for s.Stats().Buffered > 1<<17 { // within the buffer: the sink would drop (and count) the rest
				time.Sleep(time.Millisecond)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	emitTime := time.Since(start)
	if err := s.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	// Wait until every slice has arrived (bounded).
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		mu.Lock()
		all := len(arrived) == len(emitted)
		mu.Unlock()
		if all {
			break
		}
		if time.Now().After(deadline) {
			break
		}
	}
	total2 := time.Since(start)
	chCPU1, kCPU1 := serverCPU(b, fl)
	close(done)
	if err := <-polled; err != nil {
		b.Fatal(err)
	}
	rc, err := c.Do(ctx, "SELECT count(), uniqExact(end_ns) FROM "+db+".flows FORMAT TabSeparated", nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	var rows, distinct int64
	_, err = fmt.Fscan(rc, &rows, &distinct)
	rc.Close()
	if err != nil {
		b.Fatal(err)
	}
	if rows != sent || len(arrived) != len(emitted) {
		b.Fatalf("%d of %d records queryable (%d of %d slices complete within 5 min)", rows, sent, len(arrived), len(emitted))
	}
	if st := s.Stats(); st.Dropped != [3]uint64{} {
		b.Fatalf("the sink dropped %v", st.Dropped)
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Milliseconds()) }
	b.ReportMetric(float64(sent)/total2.Seconds(), "records/s")
	b.ReportMetric(float64(sent)/emitTime.Seconds(), "emitted/s")
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "max-ms")
	b.ReportMetric(float64((chCPU1-chCPU0).Nanoseconds())/float64(sent)/1e3, "clickhouse-cpu-µs/record")
	b.ReportMetric(float64((kCPU1-kCPU0).Nanoseconds())/float64(sent)/1e3, "kafka-cpu-µs/record")
	b.Logf("%d records emitted in %v (%d distinct timestamps), all queryable after %v", sent, emitTime.Round(time.Millisecond), distinct, total2.Round(time.Millisecond))
}

// serverCPU is the CPU time ClickHouse and the broker have used so far
// (their share of a run is the difference; the poller's queries are in
// ClickHouse's, a few per second).
func serverCPU(b *testing.B, fl *testfleet.Fleet) (ch, k time.Duration) {
	ch, err := fl.CPU("clickhouse")
	if err != nil {
		b.Fatal(err)
	}
	if k, err = fl.CPU("kafka"); err != nil {
		b.Fatal(err)
	}
	return ch, k
}

// sliceCounts counts db.flows' rows per slice of end_ns from slice from on.
func sliceCounts(ctx context.Context, c Conn, db string, from, slice int64) (map[int64]int64, error) {
	q := fmt.Sprintf("SELECT intDiv(end_ns, %d) * %d AS s, count() FROM %s.flows WHERE start >= toDateTime(%d) AND end_ns >= %d GROUP BY s FORMAT TabSeparated",
		slice, slice, db, from/int64(time.Second), from)
	rc, err := c.Do(ctx, q, nil, nil)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	out := map[int64]int64{}
	sc := bufio.NewScanner(rc)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			return nil, fmt.Errorf("unexpected line %q", sc.Text())
		}
		sl, err1 := strconv.ParseInt(f[0], 10, 64)
		n, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("unexpected line %q", sc.Text())
		}
		out[sl] = n
	}
	return out, sc.Err()
}
