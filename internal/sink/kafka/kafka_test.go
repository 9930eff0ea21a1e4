package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/metrics"
)

const topic = "weir-flows"

// records makes n records of flows flows, each record's Packets its
// sequence number, so that a consumer can tell every record apart.
func records(n, flows int, node string) []flow.Record {
	out := make([]flow.Record, n)
	for i := range out {
		r := &out[i]
		f := i % flows
		r.Key.SetSrc(netip.AddrFrom4([4]byte{10, 0, byte(f >> 8), byte(f)}))
		r.Key.SetDst(netip.AddrFrom4([4]byte{10, 1, 0, 1}))
		r.Key.SrcPort, r.Key.DstPort, r.Key.Proto = uint16(40000+f), 443, flow.ProtoTCP
		r.Packets, r.Bytes, r.Start, r.End = uint64(i), uint64(i)*100, int64(i), int64(i)+1
		r.Iface, r.Node = "eth0", node
	}
	return out
}

func newFake(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(4, topic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newSink(t testing.TB, addr, opts string) *Sink {
	cfg, err := ParseURL("kafka://" + addr + "/" + topic + opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// consume reads records from the topic until it has want of them or
// timeout passes; it returns them by Packets (sequence) with their
// partition, and fails on a duplicate or an undecodable value.
func consume(t testing.TB, addr string, want int, timeout time.Duration) map[uint64]int32 {
	t.Helper()
	return consumeTopic(t, addr, topic, want, timeout)
}

// consumeTopic is consume of another topic than the tests' own.
func consumeTopic(t testing.TB, addr, topic string, want int, timeout time.Duration) map[uint64]int32 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[uint64]int32{}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for len(got) < want && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			var rec flow.Record
			_, err := Rows(r, &rec, func(rec *flow.Record) {
				if _, dup := got[rec.Packets]; dup {
					t.Fatalf("record %d delivered twice", rec.Packets)
				}
				h := KeyHash(&rec.Key)
				if len(r.Key) == 1 && r.Key[0] != byte(h>>56) || len(r.Key) == 8 && binary.BigEndian.Uint64(r.Key) != h || len(r.Key) != 1 && len(r.Key) != 8 {
					t.Fatalf("record %d of hash %x in a message keyed %x", rec.Packets, h, r.Key)
				}
				got[rec.Packets] = r.Partition
			})
			if err != nil {
				t.Fatalf("message at %d/%d: %v", r.Partition, r.Offset, err)
			}
		})
	}
	return got
}

// TestProduce: every record arrives once, decodes to what was written, and
// all records of a flow share a partition (the key is the flow's).
func TestProduce(t *testing.T) {
	c := newFake(t)
	addr := c.ListenAddrs()[0]
	s := newSink(t, addr, "")
	const n, flows = 5000, 97
	recs := records(n, flows, "node-a")
	for i := 0; i < n; i += 500 {
		if err := s.Write(recs[i : i+500]); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := consume(t, addr, n, 30*time.Second)
	if len(got) != n {
		t.Fatalf("%d of %d records arrived", len(got), n)
	}
	parts := map[int]int32{}
	used := map[int32]bool{}
	for seq, p := range got {
		f := int(seq) % flows
		if q, ok := parts[f]; ok && q != p {
			t.Fatalf("flow %d in partitions %d and %d", f, q, p)
		}
		parts[f] = p
		used[p] = true
	}
	if len(used) < 2 {
		t.Errorf("%d flows all in one partition: keys do not spread", flows)
	}
	st := s.Stats()
	if st.Records != n || st.Produced != n || st.Buffered != 0 || st.Dropped != [numDropReasons]uint64{} || st.Bytes == 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestKeyHash: a flow's key is the same in both orientations and differs
// between flows.
func TestKeyHash(t *testing.T) {
	var k flow.Key
	k.SetSrc(netip.MustParseAddr("10.0.0.1"))
	k.SetDst(netip.MustParseAddr("10.0.0.2"))
	k.SrcPort, k.DstPort, k.Proto = 40000, 443, 6
	r := k.Reverse()
	if KeyHash(&k) != KeyHash(&r) {
		t.Error("orientation changes the key")
	}
	o := k
	o.SrcPort++
	p := k
	p.Proto = 17
	if KeyHash(&k) == KeyHash(&o) || KeyHash(&k) == KeyHash(&p) {
		t.Error("different flows share a key")
	}
}

// down makes the fake broker drop every produce request's connection until
// up is closed: the producer sees a broker that went away.
func down(c *kfake.Cluster) (up func(), refused *atomic.Int64) {
	refused = new(atomic.Int64)
	var back atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if back.Load() {
			c.DropControl()
			return nil, nil, false
		}
		c.KeepControl()
		refused.Add(1)
		return nil, errors.New("broker away"), true
	})
	return func() { back.Store(true) }, refused
}

// TestBrokerAway: records written while the broker refuses every request
// stay buffered and all arrive once it is back; none is lost or doubled.
func TestBrokerAway(t *testing.T) {
	c := newFake(t)
	addr := c.ListenAddrs()[0]
	up, refused := down(c)
	s := newSink(t, addr, "")
	const n = 3000
	if err := s.Write(records(n, 50, "")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for refused.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if refused.Load() < 3 || s.Stats().Buffered != n {
		t.Fatalf("%d requests refused, %d buffered", refused.Load(), s.Stats().Buffered)
	}
	up()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := consume(t, addr, n, 30*time.Second); len(got) != n {
		t.Fatalf("%d of %d records arrived after the broker came back", len(got), n)
	}
	if st := s.Stats(); st.Produced != n || st.Dropped != [numDropReasons]uint64{} {
		t.Errorf("stats %+v", st)
	}
}

// TestBufferFull: with the broker away, records past buffer-records are
// dropped and counted at once (Write does not block), the buffered ones
// arrive later, and the counts add up.
func TestBufferFull(t *testing.T) {
	c := newFake(t)
	addr := c.ListenAddrs()[0]
	up, _ := down(c)
	s := newSink(t, addr, "?buffer-records=100")
	start := time.Now()
	for i := range 10 {
		if err := s.Write(records(100, 7, "")[i*10 : i*10+10]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Write(records(900, 7, "")); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Write blocked for %v", d)
	}
	st := s.Stats()
	if st.Records != 1000 || st.Buffered != 100 || st.Dropped[DropBufferFull] != 900 {
		t.Fatalf("stats %+v", st)
	}
	up()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Produced != 100 || st.Buffered != 0 || st.Produced+st.Dropped[DropBufferFull] != st.Records {
		t.Errorf("stats after the broker came back %+v", st)
	}
}

// TestProduceError: a broker that refuses records for good (here
// INVALID_RECORD) has them dropped and counted by its error.
func TestProduceError(t *testing.T) {
	c := newFake(t)
	addr := c.ListenAddrs()[0]
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		resp.SetVersion(req.GetVersion())
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID // v13 names topics by ID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.InvalidRecord.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	s := newSink(t, addr, "")
	const n = 200
	if err := s.Write(records(n, 3, "")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.Flush(ctx)
	st := s.Stats()
	if st.Dropped[DropProduceError] != n || st.Errors["INVALID_RECORD"] != n || st.Produced != 0 {
		t.Errorf("stats %+v", st)
	}
	var b strings.Builder
	reg := metrics.NewRegistry()
	if err := reg.Register(Collector(s)); err != nil {
		t.Fatal(err)
	}
	reg.WriteTo(&b)
	for _, want := range []string{
		`weir_kafka_dropped_records_total{destination="kafka://` + addr + `/weir-flows",reason="produce_error"} 200`,
		`weir_kafka_produce_errors_total{destination="kafka://` + addr + `/weir-flows",error="INVALID_RECORD"} 200`,
		`weir_kafka_records_total{destination="kafka://` + addr + `/weir-flows"} 200`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, b.String())
		}
	}
}

// TestCloseTimeout: Close with the broker away returns within its
// close-timeout (and a little), counts what it had to drop as shutdown,
// and Write afterwards is refused and counted.
func TestCloseTimeout(t *testing.T) {
	c := newFake(t)
	down(c)
	s := newSink(t, c.ListenAddrs()[0], "?close-timeout=300ms")
	if err := s.Write(records(500, 5, "")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := s.Close()
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Close took %v", d)
	}
	if err == nil || !strings.Contains(err.Error(), "close-timeout") {
		t.Errorf("Close: %v", err)
	}
	if err := s.Write(records(10, 1, "")); err == nil {
		t.Error("Write after Close accepted")
	}
	if st := s.Stats(); st.Dropped[DropShutdown] != 510 || st.Buffered != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestRestart: the fake broker, keeping its log on disk, is stopped and
// started again on the same port while records flow; every record written,
// before, during and after, arrives exactly once.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(4, topic), kfake.DataDir(dir), kfake.Ports(port)}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s := newSink(t, addr, "")
	recs := records(3000, 40, "")
	s.Write(recs[:1000])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	s.Write(recs[1000:2000]) // broker away
	time.Sleep(300 * time.Millisecond)
	if c, err = kfake.NewCluster(opts...); err != nil {
		t.Fatalf("restarting the fake broker: %v", err)
	}
	t.Cleanup(c.Close)
	s.Write(recs[2000:])
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := consume(t, addr, len(recs), 30*time.Second); len(got) != len(recs) {
		t.Fatalf("%d of %d records arrived across the restart", len(got), len(recs))
	}
	if st := s.Stats(); st.Produced != 3000 || st.Dropped != [numDropReasons]uint64{} {
		t.Errorf("stats %+v", st)
	}
}

// BenchmarkWrite times Write with a fake broker that takes every record:
// the agent's cost per record (row encoding, key, handing the record to
// franz-go) plus franz-go's batching, compression and sending, and the fake
// broker's work, all on the same cores. allocs/op is per record.
func BenchmarkWrite(b *testing.B) {
	c := newFake(b)
	s := newSink(b, c.ListenAddrs()[0], "")
	recs := records(1024, 1024, "node-a")
	b.ReportAllocs()
	ctx := context.Background()
	i := 0
	for b.Loop() {
		if err := s.Write(recs[i%1024 : i%1024+1]); err != nil {
			b.Fatal(err)
		}
		i++
		if i%(1<<16) == 0 {
			s.Flush(ctx) // keep the buffer from filling: Write would only count drops
		}
	}
	s.Flush(ctx)
	if st := s.Stats(); st.Dropped != [numDropReasons]uint64{} {
		b.Fatalf("dropped %v", st.Dropped)
	}
}

// BenchmarkProduce times the agent's per-record producer path alone:
// Write's row encoding, key hash and slot, and franz-go's TryProduce
// appending the record to its partition's batch — no network: the linger
// is 10 s (the most the URL takes) and every 16,384 records (4 partitions × ~1.8 MB, under a
// batch's 1 MB limit so no batch is sent early) the timer stops while
// Flush sends them to a fake broker. ns/op, cpu-ns/op (the process's CPU
// while timed) and allocs/op are per record.
func BenchmarkProduce(b *testing.B) {
	c := newFake(b)
	s := newSink(b, c.ListenAddrs()[0], "?linger=10s&buffer-records=40000")
	recs := records(1024, 1024, "node-a")
	ctx := context.Background()
	var cpu time.Duration // process CPU while timed (getrusage: the machine may be loaded, wall time is then inflated)
	var ru syscall.Rusage
	used := func() time.Duration {
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	t0 := used()
	flush := func() {
		s.sendAll(false) // part of the producer path: TryProduce of the open messages
		b.StopTimer()
		cpu += used() - t0
		if err := s.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		t0 = used()
		b.StartTimer()
	}
	for i := range 1 << 15 { // make the slots and warm franz-go's pools
		s.Write(recs[i%1024 : i%1024+1])
	}
	flush()
	cpu = 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		s.Write(recs[i%1024 : i%1024+1])
		if i%(1<<14) == 1<<14-1 {
			flush()
		}
	}
	flush()
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	if st := s.Stats(); st.Dropped != [numDropReasons]uint64{} || st.Produced != st.Records {
		b.Fatalf("stats %+v", st)
	}
}

// TestWriteAllocs: once its slots exist, Write allocates nothing per
// record; what remains is franz-go's batch bookkeeping, amortised over a
// batch's records. Linger is long so that nothing is sent while Write is
// measured (the count is the whole process's).
func TestWriteAllocs(t *testing.T) {
	c := newFake(t)
	s := newSink(t, c.ListenAddrs()[0], "?linger=5s&buffer-records=20000")
	recs := records(10000, 1000, "node-a")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 2 { // make the slots, then reuse them
		s.Write(recs)
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := 0; i < len(recs); i += 100 {
		s.Write(recs[i : i+100])
	}
	runtime.ReadMemStats(&m1)
	per := float64(m1.Mallocs-m0.Mallocs) / float64(len(recs))
	t.Logf("%.4f allocations per record", per)
	if per > 0.05 {
		t.Errorf("%.3f allocations per record", per)
	}
	if st := s.Stats(); st.Dropped != [numDropReasons]uint64{} {
		t.Errorf("dropped %v", st.Dropped)
	}
}
