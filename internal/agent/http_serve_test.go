package agent

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/sink"
)

// routedProducer serves a route, and while it runs fetches what the
// agent's listener serves.
type routedProducer struct {
	fakeProducer
	addr    string
	metrics string
	live    string
	pending int
}

func (p *routedProducer) Routes(pending ...func(func(*flow.Record))) []metrics.Route {
	p.pending = len(pending)
	return []metrics.Route{{Pattern: "GET /flows/live", Handler: http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		io.WriteString(rw, "live flows")
	})}}
}

func (p *routedProducer) Run(ctx context.Context, out sink.Sink) error {
	if err := out.Write(make([]flow.Record, 7)); err != nil {
		return err
	}
	get := func(path string) string {
		resp, err := http.Get("http://" + p.addr + path)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	p.live = get("/flows/live")
	p.metrics = get("/metrics")
	return nil
}

// TestMetricsServed: while the producer runs, the listener serves the
// Go, process and sink-queue metrics and the producer's own routes.
func TestMetricsServed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := &routedProducer{addr: addr}
	s := &recSink{}
	_, err = run(t, Config{Open: func() (Producer, error) { return p, nil }, Live: true, HTTP: HTTP{Addr: addr},
		Sinks: Sinks{Extra: []Output{{Name: "s", Sink: s}}}})
	if err != nil {
		t.Fatal(err)
	}
	if p.live != "live flows" {
		t.Errorf("/flows/live: %q", p.live)
	}
	for _, want := range []string{"go_goroutines", "process_resident_memory_bytes", `weir_sink_queue_capacity{sink="s"} 256`} {
		if !strings.Contains(p.metrics, want) {
			t.Errorf("/metrics lacks %s:\n%.2000s", want, p.metrics)
		}
	}
	if _, err := run(t, Config{Open: func() (Producer, error) { return p, nil }, HTTP: HTTP{Addr: "0.0.0.0:0"}}); ExitCode(err) != ExitUsage ||
		!strings.Contains(err.Error(), "--metrics-public") {
		t.Errorf("a public address without --metrics-public: %v", err)
	}
}
