package ipfixrecv

import (
	"maps"
	"net/netip"
	"slices"

	"github.com/weir-dev/weir/internal/ipfix"
	"github.com/weir-dev/weir/internal/metrics"
)

// Metric descriptions; docs/metrics.md documents each.
var (
	mMessages    = desc("weir_collector_messages_total", "Export messages received, by protocol version (netflow5, netflow9, ipfix).", metrics.Counter, "version")
	mRecords     = desc("weir_collector_records_total", "Flow records decoded and passed on.", metrics.Counter)
	mOptions     = desc("weir_collector_options_records_total", "Options data records decoded (kept, e.g. sampling; not flows).", metrics.Counter)
	mTemplates   = desc("weir_collector_templates_total", "Template records learnt, refreshes included.", metrics.Counter)
	mWithdrawn   = desc("weir_collector_template_withdrawals_total", "Templates withdrawn by their exporter.", metrics.Counter)
	mExpired     = desc("weir_collector_templates_expired_total", "Templates forgotten because they were not refreshed (--template-timeout).", metrics.Counter)
	mLive        = desc("weir_collector_templates", "Templates held now.", metrics.Gauge)
	mSessions    = desc("weir_collector_sessions", "Template sessions (exporter, port over UDP, observation domain) held now.", metrics.Gauge)
	mStateBytes  = desc("weir_collector_template_state_bytes", "Bytes of template state held now (charged to --template-budget).", metrics.Gauge)
	mBudget      = desc("weir_collector_template_budget_bytes", "The template state's bound (--template-budget).", metrics.Gauge)
	mEvicted     = desc("weir_collector_sessions_evicted_total", "Template sessions forgotten before their exporter ended them, by reason.", metrics.Counter, "reason")
	mGaps        = desc("weir_collector_sequence_gaps_total", "Messages whose sequence number was not the one expected (lost, late or reset), by exporter address (\"other\" past the first 1,024 exporters).", metrics.Counter, "exporter")
	mLost        = desc("weir_collector_lost_records_total", "Data records the sequence numbers of IPFIX and NetFlow v5 say were lost, by exporter address.", metrics.Counter, "exporter")
	mLostPackets = desc("weir_collector_lost_export_packets_total", "NetFlow v9 export packets the sequence numbers say were lost (v9 numbers packets, not records), by exporter address.", metrics.Counter, "exporter")
	mLate        = desc("weir_collector_late_records_total", "Records of messages that came late or twice (counted lost when their successor came).", metrics.Counter)
	mSeqEvents   = desc("weir_collector_sequence_events_total", "Sequence numbers that went back: reorder (a late message), reset (an exporter restarted).", metrics.Counter, "event")
	mSockDrops   = desc("weir_collector_socket_drops_total", "Datagrams the kernel dropped at a full UDP socket receive buffer (SO_RXQ_OVFL).", metrics.Counter)
	mRetimed     = desc("weir_collector_records_retimed_total", "Records given the receive time, by reason: clock_skew (times further than --max-clock-skew from it), no_time.", metrics.Counter, "reason")
	mNames       = desc("weir_collector_iface_names_total", "Interface names from the network altered or refused, by reason: sanitised (names), refused, per_exporter, global (records given \"(other)\").", metrics.Counter, "reason")
	mNodeNames   = desc("weir_collector_node_names_sanitised_total", "Node names (observationDomainName) from the network that were not printable UTF-8 of at most 254 bytes: replaced and cut.", metrics.Counter)
	mSkipped     = desc("weir_collector_skipped_sets_total", "Data sets skipped (unknown template or reserved set id).", metrics.Counter)
	mErrors      = desc("weir_collector_decode_errors_total", "Messages, sets or records that could not be decoded, by reason.", metrics.Counter, "reason")
	mConns       = desc("weir_collector_connections", "TCP/TLS connections open now.", metrics.Gauge)
	mAccepted    = desc("weir_collector_connections_accepted_total", "TCP/TLS connections accepted.", metrics.Counter)
	mRejected    = desc("weir_collector_connections_rejected_total", "TCP/TLS connections closed at once, by reason: max_conns (at shutdown), per_source.", metrics.Counter, "reason")
	mClosed      = desc("weir_collector_connections_closed_total", "TCP/TLS connections the collector closed, by reason: idle, handshake_timeout, handshake_failed, evicted (to make room at --max-conns), message_timeout.", metrics.Counter, "reason")
	mPartial     = desc("weir_collector_partial_messages_total", "Messages cut short when their TCP/TLS connection closed (received in part, not decoded).", metrics.Counter)
	mPartialB    = desc("weir_collector_partial_bytes_total", "Bytes of the messages cut short when their TCP/TLS connection closed.", metrics.Counter)
	mReadErrs    = desc("weir_collector_read_errors_total", "Socket reads or accepts that failed.", metrics.Counter)
	mSinkErrs    = desc("weir_collector_sink_errors_total", "Batches the sinks refused.", metrics.Counter)
	mIntern      = desc("weir_collector_intern_full_total", "Times a session's table of enterprise strings (workloads, services, rules; --ipfix-pen) was emptied because it was full.", metrics.Counter)
)

func desc(name, help string, t metrics.Type, labels ...string) *metrics.Desc {
	return &metrics.Desc{Name: name, Help: help, Type: t, Labels: labels}
}

type promCollector struct{ c *Collector }

// Collector returns a metrics.Collector of the collector's counters.
func (c *Collector) Collector() metrics.Collector { return &promCollector{c} }

// Describe lists every metric the collector emits.
func (p *promCollector) Describe() []*metrics.Desc {
	return []*metrics.Desc{mMessages, mRecords, mOptions, mTemplates, mWithdrawn, mExpired, mLive, mSessions, mStateBytes,
		mBudget, mEvicted, mGaps, mLost, mLostPackets, mLate, mSeqEvents, mSockDrops, mRetimed, mNames, mNodeNames, mSkipped, mErrors,
		mConns, mAccepted, mRejected, mClosed, mPartial, mPartialB, mReadErrs, mSinkErrs, mIntern}
}

// Collect writes the current values.
func (p *promCollector) Collect(w *metrics.Writer) {
	st := p.c.Stats()
	for i, v := range []string{"netflow5", "netflow9", "ipfix"} {
		w.Sample(mMessages, float64(st.Messages[i]), v)
	}
	for _, a := range slices.SortedFunc(maps.Keys(st.LossByExporter), netip.Addr.Compare) {
		name, l := "other", st.LossByExporter[a]
		if a != OtherExporter {
			name = a.String()
		}
		w.Sample(mGaps, float64(l.Gaps), name)
		w.Sample(mLost, float64(l.Records), name)
		w.Sample(mLostPackets, float64(l.Packets), name)
	}
	for i, n := range st.Errors {
		w.Sample(mErrors, float64(n), ipfix.DecodeError(i).String())
	}
	for i, n := range st.Evicted {
		w.Sample(mEvicted, float64(n), ipfix.EvictReason(i).String())
	}
	for _, s := range []struct {
		d     *metrics.Desc
		v     uint64
		label string
	}{
		{mSeqEvents, st.SeqReorders, "reorder"}, {mSeqEvents, st.SeqResets, "reset"},
		{mRetimed, st.ClockSkew, "clock_skew"}, {mRetimed, st.NoTime, "no_time"},
		{mNames, st.NamesSanitised, "sanitised"}, {mNames, st.NamesRefused, "refused"},
		{mNames, st.OtherIfaceExporter, "per_exporter"}, {mNames, st.OtherIfaceGlobal, "global"},
		{mRejected, st.ConnsRejected, "max_conns"}, {mRejected, st.ConnsRejectedPerSource, "per_source"},
		{mClosed, st.ConnsIdleClosed, "idle"}, {mClosed, st.HandshakeTimeouts, "handshake_timeout"},
		{mClosed, st.HandshakeFailures, "handshake_failed"}, {mClosed, st.ConnsEvicted, "evicted"},
		{mClosed, st.ConnsMessageTimeouts, "message_timeout"},
	} {
		w.Sample(s.d, float64(s.v), s.label)
	}
	for _, s := range []struct {
		d *metrics.Desc
		v float64
	}{{mRecords, float64(st.Records)}, {mOptions, float64(st.OptionsRecords)}, {mTemplates, float64(st.Templates)},
		{mWithdrawn, float64(st.Withdrawals)}, {mExpired, float64(st.Expired)}, {mLive, float64(st.TemplatesLive)},
		{mSessions, float64(st.SessionsLive)}, {mStateBytes, float64(st.BudgetUsed)}, {mBudget, float64(st.BudgetLimit)},
		{mLate, float64(st.LateRecords)}, {mSockDrops, float64(st.SocketDrops)},
		{mSkipped, float64(st.SkippedSets)}, {mConns, float64(st.ConnsOpen)}, {mAccepted, float64(st.ConnsAccepted)},
		{mPartial, float64(st.PartialMessages)}, {mPartialB, float64(st.PartialBytes)},
		{mReadErrs, float64(st.ReadErrors)}, {mSinkErrs, float64(st.SinkErrors)}, {mIntern, float64(st.InternFull)},
		{mNodeNames, float64(st.NodesSanitised)}} {
		w.Sample(s.d, s.v)
	}
}
