package clickhouse

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/sink/kafka"
	"github.com/weir-dev/weir/internal/testfleet"
)

// BenchmarkIngest measures the two ingestions of `weir clickhouse setup`
// side by side, in one run, on the real broker and ClickHouse server
// (scripts/cluster.sh, or WEIR_FLEET's), each in a database and topic of
// its own:
//
//   - kafka-engine: --ingest kafka, the server's Kafka engine reading
//     one-row messages (?format=row) through its materialized views;
//   - weir-ingest: --ingest weir, the default: packed messages read by a
//     `weir ingest` process (batches of 200,000 rows or 1 s), inserting
//     into flows_input's views;
//   - weir-ingest-large: the same with batches of 1,000,000 rows or 5 s
//     (ClickHouse's rollups aggregate more per insert on repeating flows).
//
// The Kafka sink emits records paced at WEIR_INGEST_RATE records/s
// (default 200,000; 0: as fast as the sink takes them) for
// WEIR_INGEST_SECONDS (default 15), each stamped with its emission time
// (end_ns). Every 250 ms the benchmark counts, per 100 ms of emission time,
// the rows queryable in flows; a slice's records count as arrived when all
// of them are there, and their latency is that poll's time minus the
// slice's first emission (an upper bound: up to 100 ms + one poll late).
// It reports records/s end to end (records / (first emission → all
// queryable)), the emitting rate reached, p50/p99/max latency in ms, the
// CPU per record of the ClickHouse server, the broker, the sending process
// (this one: the sink and the poller) and the weir ingest process, and
// fails if a record is missing or doubled. Run it with -benchtime 1x.
func BenchmarkIngest(b *testing.B) {
	rate, secs := 200000.0, 15.0
	if v := os.Getenv("WEIR_INGEST_RATE"); v != "" {
		rate, _ = strconv.ParseFloat(v, 64)
	}
	if v := os.Getenv("WEIR_INGEST_SECONDS"); v != "" {
		secs, _ = strconv.ParseFloat(v, 64)
	}
	fl := testfleet.Start(b, testfleet.Kafka|testfleet.ClickHouse)
	for _, m := range []ingestMode{
		{name: "kafka-engine"},
		{name: "weir-ingest", weir: []string{"--batch-rows", "200000", "--batch-delay", "1s"}},
		{name: "weir-ingest-large", weir: []string{"--batch-rows", "1000000", "--batch-delay", "5s", "--batch-bytes", "536870912"}},
	} {
		b.Run(m.name, func(b *testing.B) {
			for range b.N {
				ingestOnce(b, fl, rate, secs, m)
			}
		})
	}
}

// ingestMode is how the topic reaches ClickHouse: the Kafka engine, or a
// weir ingest process with these flags.
type ingestMode struct {
	name string
	weir []string
}

func ingestOnce(b *testing.B, fl *testfleet.Fleet, rate, secs float64, m ingestMode) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	db, topic := "ingest_"+id, "weir-ingest-"+id
	opts := "?format=row" // the Kafka engine reads one-row messages without loss
	if m.weir != nil {
		opts = "" // packed, the default
	}
	kc, err := kafka.ParseURL("kafka://" + fl.Kafka + "/" + topic + opts)
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
	cfg := Config{Database: db}
	if m.weir == nil {
		cfg.Kafka, cfg.Topic, cfg.Group = kc.Brokers, topic, "ingest-"+id
	}
	if _, err := Setup(ctx, c, cfg); err != nil {
		b.Fatal(err)
	}
	defer Exec(context.Background(), c, NewStmt(false).S("DROP DATABASE IF EXISTS ", db)) // stops its Kafka consumers
	var ing *exec.Cmd
	var ingOut bytes.Buffer
	if m.weir != nil {
		ing = exec.Command(testfleet.Weir(b), append([]string{"ingest", "--kafka", fl.Kafka, "--topic", topic, "--group", "ingest-" + id,
			"--clickhouse", fl.ClickHouse, "--database", db, "--stats"}, m.weir...)...)
		ing.Stdout, ing.Stderr = &ingOut, &ingOut
		if err := ing.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() {
			if ing.ProcessState == nil {
				ing.Process.Kill()
				ing.Wait()
			}
		}()
	}
	waitGroup(ctx, b, kc, "ingest-"+id) // neither path's start-up (joining the group) counts as latency
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
	sCPU0, iCPU0 := selfCPU(), childCPU(b, ing)
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
	sCPU1, iCPU1 := selfCPU(), childCPU(b, ing)
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
	if ing != nil {
		ing.Process.Signal(syscall.SIGTERM)
		err := ing.Wait()
		b.Logf("weir ingest: %v\n%s", err, ingOut.String())
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
	b.ReportMetric(float64((sCPU1-sCPU0).Nanoseconds())/float64(sent)/1e3, "sender-cpu-µs/record")
	b.ReportMetric(float64((iCPU1-iCPU0).Nanoseconds())/float64(sent)/1e3, "ingest-cpu-µs/record")
	b.Logf("%d records emitted in %v (%d distinct timestamps), all queryable after %v", sent, emitTime.Round(time.Millisecond), distinct, total2.Round(time.Millisecond))
}

// waitGroup waits (bounded: 2 min) until the consumer group has a member
// and is stable.
func waitGroup(ctx context.Context, b *testing.B, kc *kafka.Config, group string) {
	cl, err := kgo.NewClient(kafka.ConnOpts(kc)...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && len(resp.Groups) == 1 && resp.Groups[0].State == "Stable" && len(resp.Groups[0].Members) > 0 {
			return
		}
	}
	b.Fatalf("consumer group %s did not become stable in 2 min", group)
}

// selfCPU is this process's CPU time so far (user + system).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// childCPU is the weir ingest process's CPU time so far (0 without one).
func childCPU(b *testing.B, cmd *exec.Cmd) time.Duration {
	if cmd == nil {
		return 0
	}
	d, err := testfleet.ProcCPU(cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return d
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
