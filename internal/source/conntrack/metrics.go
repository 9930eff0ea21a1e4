package conntrack

import "github.com/weir-dev/weir/internal/metrics"

// Metric descriptions; docs/metrics.md documents each (a test checks).
var (
	mPolls      = counter("weir_conntrack_polls_total", "Complete dumps of the conntrack table.")
	mPollErrors = counter("weir_conntrack_poll_errors_total", "Dumps that failed; connections missing from them are not taken as gone.")
	mResyncs    = counter("weir_conntrack_resyncs_total", "Dumps run early because the kernel dropped events (event socket overrun).")
	mPollTime   = gauge("weir_conntrack_poll_duration_seconds", "Duration of the last dump, store updates included.")
	mMessages   = counter("weir_conntrack_messages_total", "Conntrack messages decoded, by socket (dump, events).", "socket")
	mRejected   = counter("weir_conntrack_rejected_messages_total", "Conntrack messages the decoder rejected, by reason.", "reason")
	mOverruns   = counter("weir_conntrack_overruns_total", "Netlink receive buffer overruns, by socket (dump, events): messages the kernel dropped.", "socket")
	mConns      = gauge("weir_conntrack_connections", "Connections in the connection store.")
	mCapacity   = gauge("weir_conntrack_connections_capacity", "Connections the store holds at most (--ct-max-conns).")
	mNew        = counter("weir_conntrack_connections_new_total", "Connections added to the store.")
	mEvicted    = counter("weir_conntrack_evicted_connections_total", "Connections evicted because the store was full (their record has reason full).")
	mLost       = counter("weir_conntrack_lost_records_total", "Records of evicted connections lost because the pending list was full. Should stay 0.")
	mResets     = counter("weir_conntrack_counter_resets_total", "Connection counters that went backwards (clamped; unexported counts carried).")
	mFiltered   = counter("weir_conntrack_filtered_total", "Conntrack entries skipped by the zone, mark or label filter.")
	mRestarted  = counter("weir_conntrack_restarted_connections_total", "Tuples seen again as a new kernel entry (new id, or alive after their end).")
	mStale      = counter("weir_conntrack_stale_events_total", "Events read after a newer dump (lower counters than the store holds): ignored.")
	mRecords    = counter("weir_conntrack_records_total", "Records emitted, by reason (active, idle, end, stale, full, shutdown).", "reason")
	mVanished   = counter("weir_conntrack_vanished_connections_total", "Connections a dump no longer listed before their destroy event was read.")
	mForgotten  = counter("weir_conntrack_forgotten_connections_total", "Evicted connections dropped from the bounded memo, by kind (live, ended): a forgotten ended one still in the table is counted again.", "kind")
	mUntracked  = gauge("weir_conntrack_untracked", "1 while the table stays empty although TCP/UDP traffic crosses the namespace: conntrack has no hook there.")
)

func counter(name, help string, labels ...string) *metrics.Desc {
	return &metrics.Desc{Name: name, Help: help, Type: metrics.Counter, Labels: labels}
}

func gauge(name, help string, labels ...string) *metrics.Desc {
	return &metrics.Desc{Name: name, Help: help, Type: metrics.Gauge, Labels: labels}
}

// newCollector returns a metrics.Collector of a Source's counters (stats
// is Source.Stats; capacity the store's MaxConns).
func newCollector(stats func() SourceStats, capacity func() int) metrics.Collector {
	return &collector{stats: stats, capacity: capacity}
}

type collector struct {
	stats    func() SourceStats
	capacity func() int
}

// Describe lists every metric the collector emits.
func (c *collector) Describe() []*metrics.Desc {
	return []*metrics.Desc{mPolls, mPollErrors, mResyncs, mPollTime, mMessages, mRejected, mOverruns, mConns, mCapacity,
		mNew, mEvicted, mLost, mResets, mFiltered, mRestarted, mStale, mRecords, mVanished, mForgotten, mUntracked}
}

// Collect writes the current values.
func (c *collector) Collect(w *metrics.Writer) {
	st := c.stats()
	w.Sample(mPolls, float64(st.Polls))
	w.Sample(mPollErrors, float64(st.PollErrors))
	w.Sample(mResyncs, float64(st.Resyncs))
	w.Sample(mPollTime, st.PollTime.Seconds())
	w.Sample(mMessages, float64(st.Dump.Messages), "dump")
	w.Sample(mMessages, float64(st.Events.Messages), "events")
	for r := ReasonNone + 1; r < NumReasons; r++ {
		w.Sample(mRejected, float64(st.Rejected[r]), r.String())
	}
	w.Sample(mOverruns, float64(st.Dump.ENOBUFS), "dump")
	w.Sample(mOverruns, float64(st.Events.ENOBUFS), "events")
	w.Sample(mConns, float64(st.Store.Conns))
	w.Sample(mCapacity, float64(c.capacity()))
	w.Sample(mNew, float64(st.Store.New))
	w.Sample(mEvicted, float64(st.Store.Evicted))
	w.Sample(mLost, float64(st.Store.EvictedUnexported))
	w.Sample(mResets, float64(st.Store.CounterResets))
	w.Sample(mFiltered, float64(st.Store.Filtered))
	w.Sample(mRestarted, float64(st.Store.Restarted))
	w.Sample(mStale, float64(st.Store.StaleEvents))
	for r := ExportReason(0); r < NumExportReasons; r++ {
		w.Sample(mRecords, float64(st.Store.Exported[r]), r.String())
	}
	w.Sample(mVanished, float64(st.Store.Vanished))
	w.Sample(mForgotten, float64(st.Store.Forgotten), "live")
	w.Sample(mForgotten, float64(st.Store.ForgottenEnded), "ended")
	untracked := 0.0
	if st.Untracked {
		untracked = 1
	}
	w.Sample(mUntracked, untracked)
}
