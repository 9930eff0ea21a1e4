package main

import (
	"fmt"
	"io"

	"github.com/weir-dev/weir/internal/metrics"
)

// serveMetrics serves cols and the sinks' collectors at --metrics-addr,
// with routes as extra handlers, behind the token and TLS of the
// --api-* flags (httpOpts.serve); nothing when the address is "off". On
// failure it says why and returns a non-zero exit code (the caller closes
// what it opened).
func (o *captureOpts) serveMetrics(stderr io.Writer, cols []metrics.Collector, routes ...metrics.Route) (*metrics.Server, int) {
	if o.live.http.addr == "off" {
		return o.live.http.serve(stderr, "capture", nil)
	}
	reg := metrics.NewRegistry()
	for _, col := range append(cols, o.sinks.collectors()...) {
		if err := reg.Register(col); err != nil {
			fmt.Fprintf(stderr, "weir capture: metrics: %v\n", err)
			return nil, exitUsage
		}
	}
	return o.live.http.serve(stderr, "capture", reg, routes...)
}
