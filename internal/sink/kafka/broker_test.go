package kafka

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/testfleet"
)

// brokerSink starts the real broker (scripts/cluster.sh), creates the topic
// with 4 partitions and returns a sink to it.
func brokerSink(t testing.TB, opts string) (*testfleet.Fleet, *Sink) {
	f := testfleet.Start(t, testfleet.Kafka)
	cfg, err := ParseURL("kafka://" + f.Kafka + "/" + topic + opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if created, err := EnsureTopic(ctx, cfg, 4, 1); err != nil || !created {
		t.Fatalf("creating the topic: %v (created %v)", err, created)
	}
	if created, err := EnsureTopic(ctx, cfg, 4, 1); err != nil || created {
		t.Fatalf("creating the topic again: %v (created %v)", err, created)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	return f, s
}

// TestBrokerRestart, against a real Kafka broker: records written before
// it stops, while it is down (they wait in the buffer) and after it is back
// all arrive exactly once, and nothing is counted as dropped. A topic that
// does not exist is a clear error of Check.
func TestBrokerRestart(t *testing.T) {
	f, s := brokerSink(t, "")
	const n = 30000
	recs := records(n, 500, "node-a")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := ParseURL("kafka://" + f.Kafka + "/no-such-topic")
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Check(ctx); !errors.Is(err, ErrNoTopic) {
		t.Errorf("Check of a missing topic: %v", err)
	}
	other.Close()
	for i := 0; i < 10000; i += 1000 {
		s.Write(recs[i : i+1000])
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f.StopKafka()
	for i := 10000; i < 20000; i += 1000 {
		s.Write(recs[i : i+1000])
	}
	time.Sleep(time.Second) // the producer tries and fails while the broker is away
	if st := s.Stats(); st.Buffered != 10000 || st.Produced != 10000 {
		t.Fatalf("with the broker down: %+v", st)
	}
	f.StartKafka()
	for i := 20000; i < n; i += 1000 {
		s.Write(recs[i : i+1000])
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("flushing after the restart: %v", err)
	}
	if got := consume(t, f.Kafka, n, time.Minute); len(got) != n {
		t.Fatalf("%d of %d records arrived across the restart", len(got), n)
	}
	if st := s.Stats(); st.Produced != n || st.Dropped != [numDropReasons]uint64{} || st.Buffered != 0 {
		t.Errorf("stats %+v", st)
	}
}

// BenchmarkBroker sends b.N records to the real broker (acks=all, zstd, 4
// partitions) in batches of 1,024 and waits until every one is
// acknowledged: records/s is the throughput into the broker, cpu-ns/record
// this process's CPU (user+system: encoding, franz-go's batching,
// compression and sending) per record.
func BenchmarkBroker(b *testing.B) {
	_, s := brokerSink(b, "")
	recs := records(1<<16, 1<<12, "node-a")
	ctx := context.Background()
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i += 1024 {
		j := i % len(recs)
		s.Write(recs[j : j+min(1024, b.N-i)])
		for s.Stats().Buffered > 1<<17 { // stay within the buffer: this measures delivery, not drops
			time.Sleep(time.Millisecond)
		}
	}
	if err := s.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	el := time.Since(start)
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	b.ReportMetric(float64(b.N)/el.Seconds(), "records/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/record")
	if st := s.Stats(); st.Produced != uint64(b.N) || st.Dropped != [numDropReasons]uint64{} {
		b.Fatalf("stats %+v", st)
	}
}
