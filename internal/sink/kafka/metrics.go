package kafka

import (
	"slices"

	"github.com/weir-dev/weir/internal/metrics"
)

// Metric descriptions; docs/metrics.md documents each.
var (
	mRecords  = counter("weir_kafka_records_total", "Records handed to a Kafka destination.")
	mProduced = counter("weir_kafka_produced_records_total", "Records the broker acknowledged (acks=none: sent).")
	mMessages = counter("weir_kafka_produced_messages_total", "Kafka messages the broker acknowledged, each holding one or more records.")
	mBytes    = counter("weir_kafka_produced_bytes_total", "Row bytes (before compression) of the acknowledged records.")
	mBuffered = &metrics.Desc{Name: "weir_kafka_buffered_records", Help: "Records waiting for the broker.", Type: metrics.Gauge, Labels: []string{"destination"}}
	mDropped  = &metrics.Desc{Name: "weir_kafka_dropped_records_total", Help: "Records not delivered, by reason: buffer_full, produce_error, shutdown.",
		Type: metrics.Counter, Labels: []string{"destination", "reason"}}
	mErrors = &metrics.Desc{Name: "weir_kafka_produce_errors_total", Help: "Records the broker refused or the client gave up, by Kafka error name.",
		Type: metrics.Counter, Labels: []string{"destination", "error"}}
)

func counter(name, help string) *metrics.Desc {
	return &metrics.Desc{Name: name, Help: help, Type: metrics.Counter, Labels: []string{"destination"}}
}

type collector struct{ ss []*Sink }

// Collector returns a metrics.Collector of the sinks' counters, labelled by
// destination URL.
func Collector(ss ...*Sink) metrics.Collector { return &collector{ss} }

// Describe lists every metric the collector emits.
func (c *collector) Describe() []*metrics.Desc {
	return []*metrics.Desc{mRecords, mProduced, mMessages, mBytes, mBuffered, mDropped, mErrors}
}

// Collect writes each sink's counters.
func (c *collector) Collect(w *metrics.Writer) {
	for _, s := range c.ss {
		st := s.Stats()
		u := s.URL()
		w.Sample(mRecords, float64(st.Records), u)
		w.Sample(mProduced, float64(st.Produced), u)
		w.Sample(mMessages, float64(st.Messages), u)
		w.Sample(mBytes, float64(st.Bytes), u)
		w.Sample(mBuffered, float64(st.Buffered), u)
		for r, n := range st.Dropped {
			w.Sample(mDropped, float64(n), u, DropReason(r).String())
		}
		names := make([]string, 0, len(st.Errors))
		for k := range st.Errors {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			w.Sample(mErrors, float64(st.Errors[k]), u, k)
		}
	}
}
