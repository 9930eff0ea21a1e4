package ipfix

import "github.com/weir-dev/weir/internal/metrics"

// Metric descriptions; docs/metrics.md documents each.
var (
	mRecords  = counter("weir_export_records_total", "Records encoded for an IPFIX destination.")
	mMessages = counter("weir_export_messages_total", "IPFIX messages sent to a destination.")
	mBytes    = counter("weir_export_bytes_total", "IPFIX message bytes sent to a destination.")
	mUndeliv  = &metrics.Desc{Name: "weir_export_undelivered_records_total", Help: "Records that did not reach the destination, by reason (docs/metrics.md).", Type: metrics.Counter, Labels: []string{"destination", "reason"}}
	mErrors   = counter("weir_export_send_errors_total", "Messages the transport refused or failed to write.")
	mConnects = counter("weir_export_connects_total", "Stream (TCP/TLS) connections established, reconnects included.")
	mDialErrs = counter("weir_export_dial_errors_total", "Failed stream connection attempts.")
	mCut      = counter("weir_export_cut_strings_total", "Enterprise strings (workloads, services, rules; --ipfix-pen) cut so that their record fits a message.")
	mUp       = &metrics.Desc{Name: "weir_export_connected", Help: "1 while the destination's connection is up (UDP: always).", Type: metrics.Gauge, Labels: []string{"destination"}}
)

func counter(name, help string) *metrics.Desc {
	return &metrics.Desc{Name: name, Help: help, Type: metrics.Counter, Labels: []string{"destination"}}
}

type collector struct{ xs []*Exporter }

// Collector returns a metrics.Collector of the exporters' counters,
// labelled by destination URL.
func Collector(xs ...*Exporter) metrics.Collector { return &collector{xs} }

// Describe lists every metric the collector emits.
func (c *collector) Describe() []*metrics.Desc {
	return []*metrics.Desc{mRecords, mMessages, mBytes, mUndeliv, mErrors, mConnects, mDialErrs, mCut, mUp}
}

// Collect writes each exporter's counters.
func (c *collector) Collect(w *metrics.Writer) {
	for _, x := range c.xs {
		st := x.Stats()
		up := 0.0
		if st.Connected {
			up = 1
		}
		for _, s := range []struct {
			d *metrics.Desc
			v float64
		}{{mRecords, float64(st.Records)}, {mMessages, float64(st.Messages)}, {mBytes, float64(st.Bytes)},
			{mErrors, float64(st.SendErrors)},
			{mConnects, float64(st.Connects)}, {mDialErrs, float64(st.DialErrors)}, {mCut, float64(st.CutStrings)}, {mUp, up}} {
			w.Sample(s.d, s.v, x.url)
		}
		for _, r := range x.Reasons() {
			w.Sample(mUndeliv, float64(st.Undelivered[r]), x.url, r.String())
		}
	}
}
