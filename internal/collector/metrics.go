package collector

import (
	"maps"
	"net/netip"
	"slices"

	"github.com/weir-dev/weir/internal/ipfix"
	"github.com/weir-dev/weir/internal/metrics"
)

// Metric descriptions; docs/metrics.md documents each.
var (
	mMessages  = desc("weir_collector_messages_total", "Export messages received, by protocol version (netflow5, netflow9, ipfix).", metrics.Counter, "version")
	mRecords   = desc("weir_collector_records_total", "Flow records decoded and passed on.", metrics.Counter)
	mOptions   = desc("weir_collector_options_records_total", "Options data records decoded (kept, e.g. sampling; not flows).", metrics.Counter)
	mTemplates = desc("weir_collector_templates_total", "Template records learnt, refreshes included.", metrics.Counter)
	mWithdrawn = desc("weir_collector_template_withdrawals_total", "Templates withdrawn by their exporter.", metrics.Counter)
	mExpired   = desc("weir_collector_templates_expired_total", "Templates forgotten because they were not refreshed (--template-timeout).", metrics.Counter)
	mLive      = desc("weir_collector_templates", "Templates held now.", metrics.Gauge)
	mGaps      = desc("weir_collector_sequence_gaps_total", "Messages whose sequence number was not the one expected (export messages lost or reordered), by exporter address (\"other\" past the first 1,024 exporters with gaps).", metrics.Counter, "exporter")
	mSkipped   = desc("weir_collector_skipped_sets_total", "Data sets skipped (unknown template or reserved set id).", metrics.Counter)
	mErrors    = desc("weir_collector_decode_errors_total", "Messages, sets or records that could not be decoded, by reason.", metrics.Counter, "reason")
	mConns     = desc("weir_collector_connections", "TCP/TLS connections open now.", metrics.Gauge)
	mAccepted  = desc("weir_collector_connections_accepted_total", "TCP/TLS connections accepted.", metrics.Counter)
	mRejected  = desc("weir_collector_connections_rejected_total", "TCP/TLS connections closed at once because the connection bound was reached.", metrics.Counter)
	mReadErrs  = desc("weir_collector_read_errors_total", "Socket reads or accepts that failed (TLS handshakes included).", metrics.Counter)
	mSinkErrs  = desc("weir_collector_sink_errors_total", "Batches the sinks refused.", metrics.Counter)
	mIntern    = desc("weir_collector_intern_full_total", "Times a session's table of enterprise strings (workloads, services, rules; --ipfix-pen) was emptied because it was full.", metrics.Counter)
)

func desc(name, help string, t metrics.Type, labels ...string) *metrics.Desc {
	return &metrics.Desc{Name: name, Help: help, Type: t, Labels: labels}
}

type promCollector struct{ c *Collector }

// Collector returns a metrics.Collector of the collector's counters.
func (c *Collector) Collector() metrics.Collector { return &promCollector{c} }

// Describe lists every metric the collector emits.
func (p *promCollector) Describe() []*metrics.Desc {
	return []*metrics.Desc{mMessages, mRecords, mOptions, mTemplates, mWithdrawn, mExpired, mLive, mGaps,
		mSkipped, mErrors, mConns, mAccepted, mRejected, mReadErrs, mSinkErrs, mIntern}
}

// Collect writes the current values.
func (p *promCollector) Collect(w *metrics.Writer) {
	st := p.c.Stats()
	for i, v := range []string{"netflow5", "netflow9", "ipfix"} {
		w.Sample(mMessages, float64(st.Messages[i]), v)
	}
	for _, a := range slices.SortedFunc(maps.Keys(st.GapsByExporter), netip.Addr.Compare) {
		name := "other"
		if a != OtherExporter {
			name = a.String()
		}
		w.Sample(mGaps, float64(st.GapsByExporter[a]), name)
	}
	for i, n := range st.Errors {
		w.Sample(mErrors, float64(n), ipfix.DecodeError(i).String())
	}
	for _, s := range []struct {
		d *metrics.Desc
		v float64
	}{{mRecords, float64(st.Records)}, {mOptions, float64(st.OptionsRecords)}, {mTemplates, float64(st.Templates)},
		{mWithdrawn, float64(st.Withdrawals)}, {mExpired, float64(st.Expired)}, {mLive, float64(st.TemplatesLive)},
		{mSkipped, float64(st.SkippedSets)}, {mConns, float64(st.ConnsOpen)},
		{mAccepted, float64(st.ConnsAccepted)}, {mRejected, float64(st.ConnsRejected)},
		{mReadErrs, float64(st.ReadErrors)}, {mSinkErrs, float64(st.SinkErrors)}, {mIntern, float64(st.InternFull)}} {
		w.Sample(s.d, s.v)
	}
}
