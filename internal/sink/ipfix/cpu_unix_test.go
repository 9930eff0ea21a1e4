//go:build unix

package ipfix

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time so far: on a shared,
// loaded machine wall time per op lies, CPU time much less.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
