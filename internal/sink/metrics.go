package sink

import "github.com/weir-dev/weir/internal/metrics"

// Queue metric descriptions; docs/metrics.md documents each.
var (
	mQDepth   = qmetric("weir_sink_queue_depth", "Batches waiting in a sink's queue.", metrics.Gauge)
	mQCap     = qmetric("weir_sink_queue_capacity", "Batches a sink's queue holds.", metrics.Gauge)
	mQWritten = qmetric("weir_sink_records_total", "Records handed to a sink.", metrics.Counter)
	mQDropped = qmetric("weir_sink_dropped_records_total", "Records dropped because a sink's queue was full.", metrics.Counter)
	mQErrors  = qmetric("weir_sink_errors_total", "Batches a sink failed to write.", metrics.Counter)
	mQLost    = qmetric("weir_sink_lost_records_total", "Records a sink never took because weir stopped waiting for it at shutdown.", metrics.Counter)
	mQFailing = qmetric("weir_sink_failing", "1 while a sink's last write failed.", metrics.Gauge)
)

func qmetric(name, help string, t metrics.Type) *metrics.Desc {
	return &metrics.Desc{Name: name, Help: help, Type: t, Labels: []string{"sink"}}
}

type queueCollector struct{ qs []*Queue }

// QueueCollector returns a metrics.Collector of the queues' counters,
// labelled by queue name.
func QueueCollector(qs ...*Queue) metrics.Collector { return &queueCollector{qs} }

// Describe lists every metric the collector emits.
func (c *queueCollector) Describe() []*metrics.Desc {
	return []*metrics.Desc{mQDepth, mQCap, mQWritten, mQDropped, mQErrors, mQLost, mQFailing}
}

// Collect writes each queue's counters.
func (c *queueCollector) Collect(w *metrics.Writer) {
	for _, q := range c.qs {
		qs := q.Stats()
		w.Sample(mQDepth, float64(qs.Depth), q.Name())
		w.Sample(mQCap, float64(qs.Capacity), q.Name())
		w.Sample(mQWritten, float64(qs.Written), q.Name())
		w.Sample(mQDropped, float64(qs.Dropped), q.Name())
		w.Sample(mQErrors, float64(qs.Errors), q.Name())
		w.Sample(mQLost, float64(qs.Lost), q.Name())
		failing := 0.0
		if qs.Failing {
			failing = 1
		}
		w.Sample(mQFailing, failing, q.Name())
	}
}
