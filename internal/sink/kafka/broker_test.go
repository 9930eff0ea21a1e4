package kafka

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/testfleet"
)

// brokerSink starts the real broker (scripts/cluster.sh, or WEIR_FLEET's),
// creates a topic of its own with 4 partitions and returns a sink to it
// and the topic's name.
func brokerSink(t testing.TB, opts string, private bool) (*testfleet.Fleet, *Sink, string) {
	what := testfleet.Kafka
	if private { // it stops the broker
		what |= testfleet.Private
	}
	f := testfleet.Start(t, what)
	name := "weir-test-" + strconv.FormatInt(time.Now().UnixNano(), 36) // unique: a shared fleet keeps its topics
	cfg, err := ParseURL("kafka://" + f.Kafka + "/" + name + opts)
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
	return f, s, name
}

// TestBrokerRestart, against a real Kafka broker: a writer streams records
// (100 every 2 ms) while the broker is stopped — by SIGTERM as an
// operator's restart, and by SIGKILL as a crash — and started again. The
// stop comes once the stream is flowing, so records are in flight when it
// does; the writer goes on while the broker is away (those wait in the
// buffer) and after it is back. Every record arrives exactly once (each
// sequence number once, none twice), every flow's records in one
// partition, and nothing is counted as dropped. A topic that does not
// exist is a clear error of Check.
func TestBrokerRestart(t *testing.T) {
	for _, how := range []string{"term", "kill"} {
		t.Run(how, func(t *testing.T) {
			f, s, name := brokerSink(t, "", true)
			const n, flows = 40000, 500
			recs := records(n, flows, "node-a")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if how == "term" {
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
			}
			var written atomic.Int64
			done, stopped := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; i < n; i += 100 {
					if i == n/2 {
						<-stopped // the second half while the broker is away, however long stopping it takes
					}
					s.Write(recs[i : i+100])
					written.Store(int64(i + 100))
					time.Sleep(2 * time.Millisecond)
				}
			}()
			// waitFor waits (bounded) until cond holds.
			waitFor := func(what string, cond func() bool) {
				t.Helper()
				for deadline := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("waited 2 min for %s: %+v", what, s.Stats())
					}
				}
			}
			waitFor("5,000 records acknowledged", func() bool { return s.Stats().Produced >= 5000 })
			before := s.Stats()
			if how == "kill" {
				f.KillKafka()
			} else {
				f.StopKafka()
			}
			close(stopped)
			atStop := written.Load()
			waitFor("10,000 more records written", func() bool { return written.Load() >= min(atStop+10000, n) })
			down := s.Stats()
			if down.Buffered < 5000 {
				t.Errorf("with the broker down only %d records wait in the buffer: %+v", down.Buffered, down)
			}
			f.StartKafka()
			<-done
			if err := s.Flush(ctx); err != nil {
				t.Fatalf("flushing after the restart: %v", err)
			}
			got := consumeTopic(t, f.Kafka, name, n, 2*time.Minute)
			if len(got) != n {
				t.Fatalf("%d of %d records arrived across the restart", len(got), n)
			}
			for i := range n {
				if p0, p := got[uint64(i%flows)], got[uint64(i)]; p != p0 {
					t.Fatalf("record %d of flow %d in partition %d, the flow's first in %d", i, i%flows, p, p0)
				}
			}
			st := s.Stats()
			if st.Records != n || st.Produced != n || st.Dropped != [numDropReasons]uint64{} || st.Buffered != 0 {
				t.Errorf("stats %+v", st)
			}
			t.Logf("%s: %d acknowledged when the broker stopped, %d waiting while it was away; %d of %d arrived, each once, none dropped",
				how, before.Produced, down.Buffered, len(got), n)
		})
	}
}

// BenchmarkBroker sends b.N records to the real broker (acks=all, 4
// partitions) in batches of 1,024 and waits until every one is
// acknowledged, once with the URL's defaults (zstd, packed) and once with
// each option a sender may turn, each beside its one-row-a-message form
// (?format=row, the Kafka engine's): records/s is the throughput into the broker,
// cpu-ns/record this process's CPU (user+system: encoding, franz-go's
// batching, compression and sending) per record, broker-cpu-ns/record the
// broker's (its JVM, from /proc) over the same time.
func BenchmarkBroker(b *testing.B) {
	for _, bc := range []struct{ name, opts string }{
		{"default", ""},
		{"row", "?format=row"},
		{"lz4", "?compression=lz4"},
		{"row-lz4", "?format=row&compression=lz4"},
		{"none", "?compression=none"},
		{"row-none", "?format=row&compression=none"},
	} {
		b.Run(bc.name, func(b *testing.B) { benchBroker(b, bc.opts) })
	}
}

func benchBroker(b *testing.B, opts string) {
	f, s, _ := brokerSink(b, opts, false)
	recs := records(1<<16, 1<<12, "node-a")
	ctx := context.Background()
	broker := func() time.Duration {
		d, err := f.CPU("kafka")
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	bc0 := broker()
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i += 1024 {
		j := i % len(recs)
		s.Write(recs[j : j+min(1024, b.N-i)])
		for s.inflight.Load() > 1<<17 { // stay within the buffer: this measures delivery, not drops
			time.Sleep(time.Millisecond)
		}
	}
	if err := s.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	el := time.Since(start)
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	bc1 := broker()
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(b.N)/el.Seconds(), "records/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/record")
	b.ReportMetric(float64((bc1-bc0).Nanoseconds())/float64(b.N), "broker-cpu-ns/record")
	if st := s.Stats(); st.Produced != uint64(b.N) || st.Dropped != [numDropReasons]uint64{} {
		b.Fatalf("stats %+v", st)
	}
}
