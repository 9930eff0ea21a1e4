package afpacket

import (
	"bufio"
	"context"
	"math"
	"net/http"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
)

// FlowsHandler serves the flows live in the tables now as JSON lines
// (docs/record.md; end_reason "none"), largest first, followed by the
// records each of pending yields (those emitted but not yet written where
// a query reads them, e.g. store.Store.Pending): what `weir query --live`
// adds to the stored flows. It asks every worker, so it waits at most 5
// seconds.
func (c *Capture) FlowsHandler(pending ...func(fn func(*flow.Record))) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), 5*time.Second)
		defer cancel()
		recs, err := c.Top(ctx, math.MaxInt)
		if err != nil {
			http.Error(rw, "live flows: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		for _, p := range pending {
			p(func(r *flow.Record) { recs = append(recs, *r) })
		}
		rw.Header().Set("Content-Type", "application/x-ndjson")
		w := bufio.NewWriterSize(rw, 64<<10)
		var b []byte
		for i := range recs {
			b = append(format.AppendJSON(b[:0], &recs[i]), '\n')
			if _, err := w.Write(b); err != nil {
				return
			}
		}
		_ = w.Flush()
	})
}
