//go:build linux

package metrics

import (
	"bytes"
	"encoding/binary"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// userHZ is the unit of the clock tick fields of /proc/<pid>/stat. Linux
// exposes them in USER_HZ, which is 100 on every architecture Go supports.
const userHZ = 100

// procState is the process-wide state of the process collectors: two /proc
// files kept open so a scrape reads them with pread and getdents into fixed
// buffers, without allocating. They are shared by every collector (opened
// once, never closed) so creating collectors does not leak descriptors.
var procState struct {
	once    sync.Once
	mu      sync.Mutex
	statFD  int     // /proc/self/stat, or -1
	fdDirFD int     // /proc/self/fd, or -1
	start   float64 // process start time in Unix seconds, or -1
	buf     [4096]byte
}

// openProc opens procState's files and computes the start time once.
func openProc() {
	s := &procState
	s.statFD, s.fdDirFD, s.start = -1, -1, -1
	if fd, err := unix.Open("/proc/self/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		s.statFD = fd
	}
	if fd, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		s.fdDirFD = fd
	}
	btime, ok := bootTime()
	if !ok {
		return
	}
	if f, ok := statFields(s.buf[:]); ok {
		if ticks, ok := parseUint(f[statStartTime]); ok {
			s.start = float64(btime) + float64(ticks)/userHZ
		}
	}
}

// bootTime returns the btime line of /proc/stat: the boot time in Unix
// seconds.
func bootTime() (uint64, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// Fields of /proc/<pid>/stat (proc(5) numbers them from 1), as indices into
// the array statFields returns: field 3 (state) is index 0.
const (
	statStartTime = 22 - 3
	statVSize     = 23 - 3
	statRSS       = 24 - 3
	statNeeded    = statRSS + 1
)

// statFields reads /proc/self/stat into buf and splits the fields after the
// command name (which may hold blanks and parentheses, hence the last ')').
// Called with procState.mu held or from openProc.
func statFields(buf []byte) ([statNeeded][]byte, bool) {
	var f [statNeeded][]byte
	if procState.statFD < 0 {
		return f, false
	}
	n, err := unix.Pread(procState.statFD, buf, 0)
	if err != nil || n <= 0 || n == len(buf) {
		return f, false
	}
	b := buf[:n]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return f, false
	}
	b = b[i+1:]
	for k := range f {
		b = bytes.TrimLeft(b, " ")
		j := bytes.IndexByte(b, ' ')
		if j < 0 {
			j = len(b)
		}
		f[k], b = b[:j], b[j:]
		if len(f[k]) == 0 {
			return f, false
		}
	}
	return f, true
}

// parseUint parses a decimal field without allocating.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// countFDs counts the entries of /proc/self/fd, the descriptor used to read
// it included. Called with procState.mu held.
func countFDs(buf []byte) (int, bool) {
	fd := procState.fdDirFD
	if fd < 0 {
		return 0, false
	}
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return 0, false
	}
	count := 0
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return 0, false
		}
		if n <= 0 {
			return count, true
		}
		// struct linux_dirent64: ino u64, off u64, reclen u16, type u8, name.
		for b := buf[:n]; len(b) >= 20; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 20 || reclen > len(b) {
				return 0, false
			}
			if name := b[19:reclen]; !bytes.HasPrefix(name, []byte(".\x00")) && !bytes.HasPrefix(name, []byte("..\x00")) {
				count++
			}
			b = b[reclen:]
		}
	}
}

// processCollector reads the process's metrics from getrusage, getrlimit
// and /proc/self.
type processCollector struct{}

// NewProcessCollector returns a collector of the process's metrics:
// process_cpu_seconds_total, process_resident_memory_bytes,
// process_virtual_memory_bytes, process_open_fds, process_max_fds and
// process_start_time_seconds. On Linux it reads getrusage, getrlimit and
// /proc/self; collecting allocates nothing. A source it cannot read leaves
// its metrics out and counts weir_metrics_errors_total{reason="collector_read"}.
func NewProcessCollector() Collector {
	procState.once.Do(openProc)
	return processCollector{}
}

// Describe lists the process families.
func (processCollector) Describe() []*Desc {
	return []*Desc{procCPU, procRSS, procVirt, procOpenFDs, procMaxFDs, procStart}
}

// Collect reads and writes the process metrics.
func (processCollector) Collect(w *Writer) {
	sampleRusage(w)
	s := &procState
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.start >= 0 {
		w.Sample(procStart, s.start)
	} else {
		w.fail(reasonCollectorRead)
	}
	f, ok := statFields(s.buf[:])
	vsize, ok1 := parseUint(f[statVSize])
	rss, ok2 := parseUint(f[statRSS])
	if ok && ok1 && ok2 {
		w.Sample(procVirt, float64(vsize))
		w.Sample(procRSS, float64(rss)*float64(os.Getpagesize()))
	} else {
		w.fail(reasonCollectorRead)
	}
	if n, ok := countFDs(s.buf[:]); ok {
		w.Sample(procOpenFDs, float64(n))
	} else {
		w.fail(reasonCollectorRead)
	}
}
