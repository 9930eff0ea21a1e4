package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/sink"
	"github.com/weir-dev/weir/internal/source"
	"github.com/weir-dev/weir/internal/store"
)

// fakeProducer writes batches of records, then returns or waits for ctx.
type fakeProducer struct {
	batches, size int
	wait          bool          // after writing, run until ctx is done
	err           error         // Run's result
	running       chan struct{} // closed once Run has written its batches
	written       atomic.Uint64
	closed        atomic.Bool
}

func (p *fakeProducer) Run(ctx context.Context, out sink.Sink) error {
	recs := make([]flow.Record, p.size)
	for b := range p.batches {
		if len(recs) == 0 {
			break
		}
		for i := range recs {
			recs[i] = flow.Record{Packets: uint64(b*p.size + i + 1)}
		}
		recs[0].Node = "exporter" // a record that names its node keeps it
		if err := out.Write(recs); err != nil {
			return err
		}
		p.written.Add(uint64(len(recs)))
	}
	if p.running != nil {
		close(p.running)
	}
	if p.wait {
		<-ctx.Done()
	}
	return p.err
}

func (p *fakeProducer) Collector() metrics.Collector { return nil }
func (p *fakeProducer) WriteStats(w io.Writer) {
	fmt.Fprintf(w, "fake        %d records\n", p.written.Load())
}
func (p *fakeProducer) Close() error { p.closed.Store(true); return nil }

var _ source.Producer = (*fakeProducer)(nil)

// recSink counts what it takes; block, when set, holds every Write until
// it is closed.
type recSink struct {
	mu     sync.Mutex
	n      int
	nodes  map[string]int
	block  chan struct{}
	closed bool
}

func (s *recSink) Write(recs []flow.Record) error {
	if s.block != nil {
		<-s.block
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nodes == nil {
		s.nodes = map[string]int{}
	}
	s.n += len(recs)
	for i := range recs {
		s.nodes[recs[i].Node]++
	}
	return nil
}

func (s *recSink) Close() error { s.mu.Lock(); s.closed = true; s.mu.Unlock(); return nil }

func run(t *testing.T, cfg Config) (string, error) {
	t.Helper()
	var stats, log bytes.Buffer
	cfg.Stats, cfg.Log = &stats, &log
	err := Run(context.Background(), cfg)
	return stats.String() + log.String(), err
}

// TestFanOut: every sink gets every record, in order of the queues, with
// the node name filled in where a record names none; --stats prints the
// producer's lines, then one "sink queue" line per sink.
func TestFanOut(t *testing.T) {
	a, b := &recSink{}, &recSink{}
	var out bytes.Buffer
	p := &fakeProducer{batches: 50, size: 100}
	stats, err := run(t, Config{
		Open: func() (source.Producer, error) { return p, nil },
		Sinks: Sinks{Format: "json", Stdout: &out, Node: "host1",
			Extra: []Output{{Name: "a", Sink: a}, {Name: "b", Sink: b}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*recSink{"a": a, "b": b} {
		if s.n != 5000 || s.nodes["host1"] != 4950 || s.nodes["exporter"] != 50 || !s.closed {
			t.Errorf("sink %s: %d records, nodes %v, closed %v; want 5000 (4950 host1, 50 exporter), closed", name, s.n, s.nodes, s.closed)
		}
	}
	if n := strings.Count(out.String(), "\n"); n != 5000 || strings.Count(out.String(), `"node":"host1"`) != 4950 {
		t.Errorf("json: %d lines, %d of node host1; want 5000, 4950", n, strings.Count(out.String(), `"node":"host1"`))
	}
	want := "fake        5000 records\nsink queue  json: 5,000 records written, 0 dropped\n" +
		"sink queue  a: 5,000 records written, 0 dropped\nsink queue  b: 5,000 records written, 0 dropped\n"
	if stats != want {
		t.Errorf("stats:\n%s\nwant:\n%s", stats, want)
	}
	if !p.closed.Load() {
		t.Error("producer not closed")
	}
}

// TestLiveDrops: a live producer never waits for a stuck sink: what its
// queue cannot take is dropped, counted, and said by --stats, and the
// other sinks get everything.
func TestLiveDrops(t *testing.T) {
	slow, fast := &recSink{block: make(chan struct{})}, &recSink{}
	p := &fakeProducer{batches: 20, size: 10, running: make(chan struct{})}
	go func() { <-p.running; close(slow.block) }()
	stats, err := run(t, Config{
		Open:       func() (source.Producer, error) { return p, nil },
		Live:       true,
		QueueDepth: 1,
		Sinks:      Sinks{Extra: []Output{{Name: "slow", Sink: slow}, {Name: "fast", Sink: fast}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// One buffer: the first batch is in the stuck Write, every later one
	// finds no free buffer.
	if slow.n != 10 || !strings.Contains(stats, "sink queue  slow: 10 records written, 190 dropped\n") {
		t.Errorf("slow sink took %d records; stats:\n%s", slow.n, stats)
	}
	if fast.n+dropped(t, stats, "fast") != 200 {
		t.Errorf("fast sink: %d records written; stats:\n%s", fast.n, stats)
	}
}

func dropped(t *testing.T, stats, name string) int {
	var w, d int
	for _, l := range strings.Split(stats, "\n") {
		if strings.HasPrefix(l, "sink queue  "+name+":") {
			fmt.Sscanf(strings.ReplaceAll(l, ",", ""), "sink queue  "+name+": %d records written %d dropped", &w, &d)
		}
	}
	return d
}

// TestSignalBoundsExit: after SIGTERM a hung sink holds the exit for
// StopGrace at most; what it never took is counted as lost, and the run
// is still a success of the producer (the loss is the sink's error).
func TestSignalBoundsExit(t *testing.T) {
	hung := &recSink{block: make(chan struct{})}
	t.Cleanup(func() { close(hung.block) })
	p := &fakeProducer{batches: 5, size: 10, wait: true, running: make(chan struct{})}
	go func() {
		<-p.running
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}()
	start := time.Now()
	stats, err := run(t, Config{
		Open:  func() (source.Producer, error) { return p, nil },
		Live:  true,
		Sinks: Sinks{Extra: []Output{{Name: "hung", Sink: hung}}},
	})
	took := time.Since(start)
	if took > StopGrace+20*time.Second {
		t.Errorf("Run took %s after SIGTERM with a hung sink", took)
	}
	if took < StopGrace {
		t.Errorf("Run returned after %s: it did not wait StopGrace for the sink", took)
	}
	if !errors.Is(err, sink.ErrAbandoned) {
		t.Errorf("err = %v, want the queue's ErrAbandoned", err)
	}
	if !strings.Contains(stats, "lost at shutdown") {
		t.Errorf("stats do not count the lost records:\n%s", stats)
	}
}

// TestDuration: the duration ends a producer that would run forever, as
// a clean stop.
func TestDuration(t *testing.T) {
	s := &recSink{}
	p := &fakeProducer{batches: 3, size: 7, wait: true}
	_, err := run(t, Config{Open: func() (source.Producer, error) { return p, nil }, Live: true, Duration: 100 * time.Millisecond,
		Sinks: Sinks{Extra: []Output{{Name: "s", Sink: s}}}})
	if err != nil || s.n != 21 {
		t.Errorf("err %v, %d records; want nil, 21", err, s.n)
	}
}

// TestErrors: a producer that cannot start opens no sink (no data
// directory); a failing run prints no empty table but keeps what it
// reported; errors map to exit statuses.
func TestErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	storeCfg := &store.Config{Dir: dir}
	_, err := run(t, Config{Open: func() (source.Producer, error) { return nil, errors.New("no such file") }, Sinks: Sinks{Store: storeCfg}})
	if ExitCode(err) != ExitFailure {
		t.Errorf("open failure: exit %d (%v)", ExitCode(err), err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store's directory exists after a failed start: %v", err)
	}
	if _, err := run(t, Config{Open: func() (source.Producer, error) { return nil, Usagef("--read: two stdin") }}); ExitCode(err) != ExitUsage {
		t.Errorf("usage error: exit %d", ExitCode(err))
	}
	if _, err := run(t, Config{Open: func() (source.Producer, error) { return &fakeProducer{}, nil }, Sinks: Sinks{Format: "xml"}}); ExitCode(err) != ExitUsage {
		t.Errorf("--output xml: exit %d", ExitCode(err))
	}
	if _, err := run(t, Config{Open: func() (source.Producer, error) { return &fakeProducer{}, nil },
		Sinks: Sinks{Export: []string{"ipfix+sctp://127.0.0.1:1"}}}); ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "ipfix+tls://") {
		t.Errorf("bad --export: exit %d (%v)", ExitCode(err), err)
	}
	for _, recs := range []int{0, 3} {
		var out bytes.Buffer
		boom := errors.New("permission denied")
		_, err := run(t, Config{Open: func() (source.Producer, error) { return &fakeProducer{batches: 1, size: recs, err: boom}, nil },
			Sinks: Sinks{Format: "table", Stdout: &out}})
		if !errors.Is(err, boom) || ExitCode(err) != ExitFailure {
			t.Errorf("run failure: %v, exit %d", err, ExitCode(err))
		}
		if printed := out.Len() > 0; printed != (recs > 0) {
			t.Errorf("%d records then a failure: table printed %v:\n%s", recs, printed, out.String())
		}
	}
	if ExitCode(nil) != ExitOK {
		t.Error("ExitCode(nil) != 0")
	}
}
