//go:build unix

package query

import "syscall"

// cpuTime is the process's user and system CPU time in ns: on a loaded
// machine a benchmark's CPU per row says more than its wall time.
func cpuTime() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
