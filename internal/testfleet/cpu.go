package testfleet

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/PID/stat's utime and stime (USER_HZ, 100 on
// every Linux architecture weir builds for).
const userHZ = 100

// CPU is the CPU time (user + system, all threads) the fleet's server
// process has used so far: which is "kafka" or "clickhouse". Benchmarks
// read it before and after a run to charge each server its share.
func (f *Fleet) CPU(which string) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(f.dir, which, "pid"))
	if err != nil {
		return 0, fmt.Errorf("testfleet: %s's pid: %w", which, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("testfleet: %s's pid file says %q", which, b)
	}
	return procCPU(pid)
}

// procCPU reads utime + stime of pid from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("testfleet: %w", err)
	}
	// Fields after the command (which may hold spaces): state is field 3,
	// utime 14 and stime 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("testfleet: /proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("testfleet: /proc/%d/stat: %d fields after the command", pid, len(f))
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("testfleet: /proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	return time.Duration(u+s) * time.Second / userHZ, nil
}

// ProcCPU is the CPU time (user + system, all threads) process pid has
// used so far: a benchmark's child process's share, as CPU is the servers'.
func ProcCPU(pid int) (time.Duration, error) { return procCPU(pid) }
