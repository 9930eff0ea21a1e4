package runner

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/bench/result"
	"github.com/weir-dev/weir/internal/testhost"
)

// hostFacts describes this machine.
func hostFacts() result.HostFacts {
	f := result.HostFacts{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	f.Hostname, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		f.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				f.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		f.MemBytes = uint64(si.Totalram) * uint64(si.Unit)
	}
	return f
}

// nicCounters are one interface's kernel counters (/proc/net/dev).
type nicCounters struct {
	rxBytes, rxPkts, rxDrop, txBytes, txPkts, txDrop uint64
}

// readNIC reads iface's counters inside h's namespace: /proc/thread-self
// resolves against the reading thread's namespace.
func readNIC(h *testhost.Host, iface string) (nicCounters, error) {
	var c nicCounters
	found := false
	err := h.Do(func() error {
		f, err := os.Open("/proc/thread-self/net/dev")
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			name, rest, ok := strings.Cut(sc.Text(), ":")
			if !ok || strings.TrimSpace(name) != iface {
				continue
			}
			v := strings.Fields(rest)
			if len(v) < 16 {
				return fmt.Errorf("/proc/net/dev: %d fields for %s", len(v), iface)
			}
			n := make([]uint64, 16)
			for i := range n {
				if n[i], err = strconv.ParseUint(v[i], 10, 64); err != nil {
					return fmt.Errorf("/proc/net/dev: %v", err)
				}
			}
			c = nicCounters{rxBytes: n[0], rxPkts: n[1], rxDrop: n[3], txBytes: n[8], txPkts: n[9], txDrop: n[11]}
			found = true
		}
		return sc.Err()
	})
	if err == nil && !found {
		err = fmt.Errorf("no interface %s in %s", iface, h.Name)
	}
	return c, err
}

// nicStats turns two readings into the run's figures over secs seconds.
func nicStats(host string, h *testhost.Host, network string, a, b nicCounters, secs float64) result.NICStats {
	s := result.NICStats{
		Host: host, Iface: h.Iface, Net: network,
		RxPackets: b.rxPkts - a.rxPkts, TxPackets: b.txPkts - a.txPkts,
		RxBytes: b.rxBytes - a.rxBytes, TxBytes: b.txBytes - a.txBytes,
		RxDrops: b.rxDrop - a.rxDrop, TxDrops: b.txDrop - a.txDrop,
	}
	if secs > 0 {
		s.RxPktsPS, s.TxPktsPS = float64(s.RxPackets)/secs, float64(s.TxPackets)/secs
		s.RxBitsPS, s.TxBitsPS = float64(s.RxBytes)*8/secs, float64(s.TxBytes)*8/secs
	}
	return s
}
