//go:build linux

package afpacket

import (
	"context"
	"fmt"
	"time"

	"github.com/weir-dev/weir/internal/format"
)

// views prints the top live flows every ViewInterval until ctx ends.
func (c *Capture) views(ctx context.Context) {
	top := c.cfg.ViewTop
	if top <= 0 {
		top = 20
	}
	view := format.NewLiveView(c.cfg.Views, c.cfg.ViewRedraw)
	t := time.NewTicker(c.cfg.ViewInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			tctx, cancel := context.WithTimeout(ctx, c.cfg.ViewInterval)
			recs, err := c.Top(tctx, top)
			cancel()
			if err != nil {
				continue
			}
			st := c.Stats()
			var pkts, drops uint64
			open := 0
			for _, f := range st.Ifaces {
				pkts += f.Packets
				drops += f.Kernel.Drops
				if f.Open {
					open++
				}
			}
			title := fmt.Sprintf("%s  %s flows live on %d interfaces; %s packets, %s kernel drops since start",
				now.UTC().Format(time.RFC3339), format.Count(uint64(st.Flows)), open, format.Count(pkts), format.Count(drops))
			_ = view.WriteFlows(title, recs)
		}
	}
}
