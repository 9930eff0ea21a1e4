//go:build unix && !linux

package metrics

import "golang.org/x/sys/unix"

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
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil {
		w.Sample(procCPU, float64(ru.Utime.Nano()+ru.Stime.Nano())/1e9)
	} else {
		w.fail(reasonCollectorRead)
	}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		w.Sample(procMaxFDs, float64(rl.Cur))
	} else {
		w.fail(reasonCollectorRead)
	}
	w.Sample(procStart, unixSeconds(initTime))
}
