package nflog

import (
	"strconv"

	"github.com/weir-dev/weir/internal/metrics"
)

// Metric descriptions; docs/metrics.md documents each (a test checks).
var (
	mMessages = counter("weir_nflog_messages_total", "NFLOG packet messages read, by group.", "group")
	mPackets  = counter("weir_nflog_packets_total", "Dropped packets counted into deny flows, by group.", "group")
	mRejected = counter("weir_nflog_rejected_messages_total", "NFLOG messages rejected, by group and reason (bad_payload: the copied packet did not decode).", "group", "reason")
	mGaps     = counter("weir_nflog_sequence_gaps_total", "Messages the kernel numbered but never delivered, by group. Should stay 0.", "group")
	mOverruns = counter("weir_nflog_overruns_total", "Netlink receive buffer overruns (the kernel dropped messages), by group.", "group")
	mFlows    = gauge("weir_nflog_deny_flows", "Deny flows held, by group.", "group")
	mRecords  = counter("weir_nflog_records_total", "Deny-flow records handed to the sinks, by group.", "group")
	mEvicted  = counter("weir_nflog_evicted_flows_total", "Deny flows exported early because the group's table was full, by group.", "group")
	mCut      = counter("weir_nflog_prefix_cuts_total", "Log prefixes longer than 64 bytes cut to 64 (the records' rule is the cut prefix), by group.", "group")
)

func counter(name, help string, labels ...string) *metrics.Desc {
	return &metrics.Desc{Name: name, Help: help, Type: metrics.Counter, Labels: labels}
}

func gauge(name, help string, labels ...string) *metrics.Desc {
	return &metrics.Desc{Name: name, Help: help, Type: metrics.Gauge, Labels: labels}
}

// Collector returns a metrics.Collector of the source's counters.
func (s *Source) Collector() metrics.Collector { return &collector{stats: s.Stats} }

type collector struct{ stats func() []GroupStats }

// Describe lists every metric the collector emits.
func (c *collector) Describe() []*metrics.Desc {
	return []*metrics.Desc{mMessages, mPackets, mRejected, mGaps, mOverruns, mFlows, mRecords, mEvicted, mCut}
}

// Collect writes the current values.
func (c *collector) Collect(w *metrics.Writer) {
	for _, g := range c.stats() {
		grp := strconv.Itoa(int(g.Group))
		w.Sample(mMessages, float64(g.Aggregator.Messages), grp)
		w.Sample(mPackets, float64(g.Aggregator.Packets), grp)
		for r := ReasonNone + 1; r < NumReasons; r++ {
			w.Sample(mRejected, float64(g.Aggregator.Errors[r]), grp, r.String())
		}
		w.Sample(mGaps, float64(g.Aggregator.SeqGaps), grp)
		w.Sample(mOverruns, float64(g.Socket.ENOBUFS), grp)
		w.Sample(mFlows, float64(g.Flows), grp)
		w.Sample(mRecords, float64(g.Exported), grp)
		w.Sample(mEvicted, float64(g.Evicted), grp)
		w.Sample(mCut, float64(g.Aggregator.PrefixCut), grp)
	}
}
