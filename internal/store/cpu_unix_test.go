//go:build unix

package store

import (
	"syscall"
	"time"
)

// procCPU is the process's CPU time so far, user plus system (all
// goroutines: encoding on the second core and the kernel's share of
// writes and fsyncs included).
func procCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
