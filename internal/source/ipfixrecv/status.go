package ipfixrecv

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/weir-dev/weir/internal/format"
)

// status redraws the summary line on cfg.Status every StatusInterval
// until ctx is done, then erases it. Without cfg.Status it returns.
func (c *Collector) status(ctx context.Context) {
	if c.cfg.Status == nil {
		return
	}
	line := format.NewStatusLine(c.cfg.Status)
	defer func() { _ = line.Clear() }() // a status line on a terminal: a failed redraw is cosmetic
	t := time.NewTicker(c.cfg.StatusInterval)
	defer t.Stop()
	last, lastAt := c.Stats().Records, time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			st := c.Stats()
			rate := float64(st.Records-last) / max(now.Sub(lastAt).Seconds(), 1e-3)
			_ = line.Set(statusText(&st, rate))
			last, lastAt = st.Records, now
		}
	}
}

// statusText is the one-line summary of st, with the records per second.
func statusText(st *Stats, rate float64) string {
	n := format.Count
	return fmt.Sprintf("weir collect: %s records/s, %s records; %s exporter sessions, %s templates; drops: %s datagrams by the kernel, %s records lost by exporters",
		n(uint64(math.Round(rate))), n(st.Records), n(st.SessionsLive), n(st.TemplatesLive), n(st.SocketDrops), n(st.LostRecords))
}
