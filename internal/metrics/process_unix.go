//go:build unix && !linux

package metrics

import "time"

// initTime approximates the process start time where the system does not
// tell it: the moment this package was initialised.
var initTime = time.Now()

// unixSeconds returns t in seconds since the epoch, with its fraction.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// processCollector reads what getrusage and getrlimit tell on Unix systems
// without /proc.
type processCollector struct{}

// NewProcessCollector returns a collector of the process's metrics. Outside
// Linux it has process_cpu_seconds_total and process_max_fds from
// getrusage and getrlimit, and process_start_time_seconds approximated by
// the time weir's metrics package was initialised.
func NewProcessCollector() Collector { return processCollector{} }

// Describe lists the process families available here.
func (processCollector) Describe() []*Desc { return []*Desc{procCPU, procMaxFDs, procStart} }

// Collect reads and writes the process metrics.
func (processCollector) Collect(w *Writer) {
	sampleRusage(w)
	w.Sample(procStart, unixSeconds(initTime))
}
