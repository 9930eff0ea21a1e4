//go:build !unix

package metrics

// processCollector reports what is portable: the start time.
type processCollector struct{}

// NewProcessCollector returns a collector of the process's metrics. On
// systems other than Unix it has only process_start_time_seconds,
// approximated by the time weir's metrics package was initialised.
func NewProcessCollector() Collector { return processCollector{} }

// Describe lists the process families available here.
func (processCollector) Describe() []*Desc { return []*Desc{procStart} }

// Collect writes the process metrics.
func (processCollector) Collect(w *Writer) { w.Sample(procStart, unixSeconds(initTime)) }
