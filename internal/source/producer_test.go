package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/sink"
)

type testProducer struct {
	name    string
	err     error // returned at once; nil: run until ctx ends
	stopped bool
	closed  bool
}

func (p *testProducer) Run(ctx context.Context, out sink.Sink) error {
	if err := out.Write([]flow.Record{{Iface: p.name}}); err != nil {
		return err
	}
	if p.err != nil {
		return p.err
	}
	<-ctx.Done()
	p.stopped = true
	return nil
}
func (p *testProducer) Collector() metrics.Collector { return nil }
func (p *testProducer) WriteStats(w io.Writer)       { fmt.Fprintf(w, "%s\n", p.name) }
func (p *testProducer) Close() error                 { p.closed = true; return nil }

// TestAll: producers run at once into one sink; one failing stops the
// others and its error is returned; stats and Close reach each.
func TestAll(t *testing.T) {
	boom := errors.New("boom")
	a, b := &testProducer{name: "a"}, &testProducer{name: "b", err: boom}
	got := make(chan string, 2)
	p := All(a, b)
	done := make(chan error, 1)
	go func() {
		done <- p.Run(context.Background(), sink.Func(func(r []flow.Record) error { got <- r[0].Iface; return nil }))
	}()
	select {
	case err := <-done:
		if !errors.Is(err, boom) {
			t.Errorf("Run: %v, want boom", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return when one producer failed")
	}
	if !a.stopped || len(got) != 2 {
		t.Errorf("a stopped %v, %d records; want stopped, 2", a.stopped, len(got))
	}
	var w bytes.Buffer
	p.WriteStats(&w)
	if !strings.HasPrefix(w.String(), "a\nb\nmemory      RSS ") {
		t.Errorf("stats: %q", w.String())
	}
	if p.Close(); !a.closed || !b.closed {
		t.Error("Close did not reach every producer")
	}
}
