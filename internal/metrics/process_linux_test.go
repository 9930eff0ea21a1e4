//go:build linux

package metrics

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// procStatCPU returns utime+stime of /proc/self/stat in seconds: a source
// independent of the collector's getrusage.
func procStatCPU(t *testing.T) float64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ut, _ := strconv.ParseFloat(f[14-3], 64)
	st, _ := strconv.ParseFloat(f[15-3], 64)
	return (ut + st) / 100
}

// softNoFile returns the soft "Max open files" of /proc/self/limits.
func softNoFile(t *testing.T) float64 {
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(rest)
			if f[0] == "unlimited" {
				return math.MaxUint64
			}
			v, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatal("no Max open files in /proc/self/limits")
	return 0
}

func TestProcessCollectorLinux(t *testing.T) {
	r := register(t, NewProcessCollector())

	// Open 10 files between two scrapes: open_fds must grow by exactly 10.
	before := scrape(t, r)
	var files []*os.File
	for i := range 10 {
		f, err := os.Create(filepath.Join(t.TempDir(), strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	// Touch 32 MiB so it is resident, and burn some CPU.
	mem := make([]byte, 32<<20)
	for i := 0; i < len(mem); i += 4096 {
		mem[i] = 1
	}
	x := 0.0
	for i := range 20_000_000 {
		x += math.Sqrt(float64(i))
	}
	m := scrape(t, r)
	cpu := procStatCPU(t)
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(mem)

	if d := m["process_open_fds"] - before["process_open_fds"]; d != 10 {
		t.Errorf("process_open_fds grew by %v after opening 10 files, want 10", d)
	}
	if got, dir := m["process_open_fds"], float64(len(entries)); math.Abs(got-dir) > 2 {
		t.Errorf("process_open_fds = %v, /proc/self/fd has %v entries", got, dir)
	}
	if got, want := m["process_max_fds"], softNoFile(t); got != want {
		t.Errorf("process_max_fds = %v, /proc/self/limits says %v", got, want)
	}
	if got := m["process_cpu_seconds_total"]; math.Abs(got-cpu) > 0.05 {
		t.Errorf("process_cpu_seconds_total = %v, /proc/self/stat says %v (±0.05 s); x=%v", got, cpu, x)
	}
	rss, virt := m["process_resident_memory_bytes"], m["process_virtual_memory_bytes"]
	if rss < 32<<20 || virt < rss {
		t.Errorf("resident %v ≥ 32 MiB touched, ≤ virtual %v does not hold", rss, virt)
	}
	if n := len(m); n != 6+numReasons {
		t.Errorf("%d series, want %d: %v", n, 6+numReasons, m)
	}
}

func TestParseUint(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "42": 42, "18446744073709551": 18446744073709551} {
		if got, ok := parseUint([]byte(in)); !ok || got != want {
			t.Errorf("parseUint(%q) = %v, %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "-1", "1a", "12345678901234567890"} {
		if _, ok := parseUint([]byte(in)); ok {
			t.Errorf("parseUint(%q) succeeded", in)
		}
	}
}
