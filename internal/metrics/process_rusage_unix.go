//go:build unix

package metrics

import "golang.org/x/sys/unix"

// sampleRusage writes the CPU time (getrusage) and the open-file limit
// (getrlimit), counting a failed call as a collector_read error.
func sampleRusage(w *Writer) {
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
}
