// Package rusage reads the process's memory use for --stats lines.
package rusage

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// MaxRSS returns the process's peak resident set size in bytes (0 if
// unknown).
func MaxRSS() uint64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return uint64(ru.Maxrss) // bytes there
	}
	return uint64(ru.Maxrss) * 1024 // KiB on Linux and the BSDs
}

// RSSNow returns the process's resident set now (0 where /proc is missing).
func RSSNow() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// WriteMemory writes the "memory" --stats line of a producer whose
// memory is not a table's: the resident set now and at its peak.
func WriteMemory(w io.Writer, bytes func(uint64) string) {
	fmt.Fprintf(w, "memory      RSS %s now, max %s\n", bytes(RSSNow()), bytes(MaxRSS()))
}
