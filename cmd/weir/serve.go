package main

import (
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/weir-dev/weir/internal/metrics"
)

// serveMetrics serves cols and the sinks' collectors at --metrics-addr,
// with routes as extra handlers; nothing when it is "off". On failure it
// says why and returns a non-zero exit code (the caller closes what it
// opened).
func (o *captureOpts) serveMetrics(stderr io.Writer, cols []metrics.Collector, routes ...metrics.Route) (*metrics.Server, int) {
	l := &o.live
	if l.metricsAddr == "off" {
		return nil, exitOK
	}
	reg := metrics.NewRegistry()
	for _, col := range append(cols, o.sinks.collectors()...) {
		if err := reg.Register(col); err != nil {
			fmt.Fprintf(stderr, "weir capture: metrics: %v\n", err)
			return nil, exitUsage
		}
	}
	ln, err := metrics.Listen(l.metricsAddr, l.metricsPublic)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			fmt.Fprintf(stderr, "weir capture: --metrics-addr: %v (another weir running? pick another port or 'off')\n", err)
			return nil, exitFailure
		}
		fmt.Fprintf(stderr, "weir capture: --metrics-addr: %v\n", err)
		return nil, exitUsage
	}
	return metrics.Serve(ln, reg, routes...), exitOK
}
