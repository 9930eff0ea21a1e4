//go:build linux

package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/weir-dev/weir/internal/bench/engine"
	"github.com/weir-dev/weir/internal/bench/result"
	"github.com/weir-dev/weir/internal/testhost"
)

// observer is weir's capture running in the server host beside the
// traffic: on the server's interfaces (afpacket, ebpf) or its conntrack
// table (conntrack).
type observer struct {
	mode   string
	host   *testhost.Host
	ifaces []string
	nics   []*testhost.Host // the server's interfaces (one Host per network)
	before []nicCounters
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr *testhost.SyncBuffer
}

// startObserver starts `weir capture` for mode in the server's namespace
// and waits until it is ready.
func startObserver(ctx context.Context, cfg *Config, mode string, h *hosts) (*observer, error) {
	o := &observer{mode: mode, host: h.server[0], stderr: &testhost.SyncBuffer{}}
	for _, x := range h.server {
		if x != nil {
			o.ifaces = append(o.ifaces, x.Iface)
			o.nics = append(o.nics, x)
		}
	}
	exe, _ := cfg.Child("")
	args := []string{"netns", "exec", o.host.Name, exe, "capture", "-o", "json", "--metrics-addr", "off", "--data-dir", "off", "--stats"}
	var ready string
	switch mode {
	case "afpacket":
		args = append(args, "-i", strings.Join(o.ifaces, ","))
		ready = "listening on"
	case "ebpf":
		args = append(args, "--source", "ebpf", "-i", strings.Join(o.ifaces, ","), "--ebpf-evict-interval", "200ms")
		ready = "eBPF programs on"
	case "conntrack":
		// A namespace tracks connections only once a rule needs it.
		rules := "add table inet weirbench\nadd chain inet weirbench in { type filter hook input priority 0 ; }\nadd rule inet weirbench in ct state new counter\n"
		nft, err := exec.LookPath("nft")
		if err != nil {
			return nil, fmt.Errorf("--observe conntrack needs nft (apt-get install nftables): %w", err)
		}
		if out, err := o.host.Exec(ctx, nft, rules); err != nil {
			return nil, fmt.Errorf("nft: %v: %s", err, out)
		}
		args = append(args, "--source", "conntrack", "--ct-poll-interval", "200ms")
		ready = "reading the conntrack table"
	default:
		return nil, fmt.Errorf("unknown capture mode %q (%s)", mode, strings.Join(Modes, ", "))
	}
	o.cmd = exec.Command("ip", args...)
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	o.cmd.Stdout, o.cmd.Stderr = &o.stdout, o.stderr
	if err := o.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(o.stderr.String(), ready); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			o.kill()
			return nil, fmt.Errorf("weir capture (%s) did not start: %s", mode, o.stderr.String())
		}
	}
	for _, x := range o.nics {
		c, err := readNIC(x, x.Iface)
		if err != nil {
			o.kill()
			return nil, err
		}
		o.before = append(o.before, c)
	}
	return o, nil
}

func (o *observer) kill() {
	if o.cmd != nil && o.cmd.ProcessState == nil {
		_ = o.cmd.Process.Kill() // it may have exited already
		_ = o.cmd.Wait()         // "killed": expected
	}
}

// jsonFlow is the part of weir's JSON record the check reads.
type jsonFlow struct {
	SrcIP      netip.Addr `json:"src_ip"`
	DstIP      netip.Addr `json:"dst_ip"`
	SrcPort    uint16     `json:"src_port"`
	DstPort    uint16     `json:"dst_port"`
	Proto      uint8      `json:"proto"`
	Packets    uint64     `json:"packets"`
	Bytes      uint64     `json:"bytes"`
	RevPackets uint64     `json:"rev_packets"`
	RevBytes   uint64     `json:"rev_bytes"`
}

type tuple struct {
	proto    uint8
	src, dst netip.AddrPort
}

// counts are one connection's totals as seen, client to server first.
type counts struct{ fp, fb, rp, rb uint64 }

// finish stops the capture (SIGTERM: it writes what it holds) and compares
// its records with the driver's connections and the interface counters.
func (o *observer) finish(run *result.Run, _ *engine.ServerResult) result.Observed {
	res := result.Observed{Mode: o.mode, Where: o.host.Name + ":" + strings.Join(o.ifaces, ",")}
	var nicPkts, nicBytes uint64
	for i, x := range o.nics {
		c, err := readNIC(x, x.Iface)
		if err != nil {
			res.Diffs = append(res.Diffs, err.Error())
			continue
		}
		p := c.rxPkts - o.before[i].rxPkts + c.txPkts - o.before[i].txPkts
		b := c.rxBytes - o.before[i].rxBytes + c.txBytes - o.before[i].txBytes
		nicPkts += p
		nicBytes += b - 14*p // Ethernet headers: the records count IP bytes
	}
	res.NICPkts, res.NICBytes = nicPkts, nicBytes
	time.Sleep(500 * time.Millisecond)        // the last packets' polls and drains
	_ = o.cmd.Process.Signal(syscall.SIGTERM) // an exit already under way shows in Wait below
	done := make(chan error, 1)
	go func() { done <- o.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			res.Diffs = append(res.Diffs, fmt.Sprintf("weir capture: %v: %s", err, lastLines(o.stderr.String(), 5)))
		}
	case <-time.After(15 * time.Second):
		_ = o.cmd.Process.Kill() // it may have exited just now
		<-done                   //nolint:errcheck // "killed": the difference below says so
		res.Diffs = append(res.Diffs, "weir capture did not stop within 15 s")
	}
	seen := map[tuple]*counts{}
	sc := bufio.NewScanner(&o.stdout)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		var f jsonFlow
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			res.Diffs = append(res.Diffs, fmt.Sprintf("bad record: %v", err))
			continue
		}
		k := tuple{f.Proto, netip.AddrPortFrom(f.SrcIP.Unmap(), f.SrcPort), netip.AddrPortFrom(f.DstIP.Unmap(), f.DstPort)}
		c := seen[k]
		if c == nil {
			c = &counts{}
			seen[k] = c
		}
		c.fp += f.Packets
		c.fb += f.Bytes
		c.rp += f.RevPackets
		c.rb += f.RevBytes
		res.SeenPkts += f.Packets + f.RevPackets
		res.SeenBytes += f.Bytes + f.RevBytes
	}
	compare(&res, run.Conns, seen)
	if res.SeenPkts != res.NICPkts || res.SeenBytes != res.NICBytes {
		res.Diffs = append(res.Diffs, fmt.Sprintf("interface counters: %d packets, %d IP bytes; records: %d packets, %d bytes", res.NICPkts, res.NICBytes, res.SeenPkts, res.SeenBytes))
	}
	res.OK = len(res.Diffs) == 0 && res.Matched == res.Conns
	return res
}

// compare matches the driver's connections with the records.
func compare(res *result.Observed, conns []result.ConnStats, seen map[tuple]*counts) {
	used := map[tuple]bool{}
	for _, c := range conns {
		res.Conns++
		cl, err1 := netip.ParseAddrPort(c.Client)
		sv, err2 := netip.ParseAddrPort(c.Server)
		if err1 != nil || err2 != nil {
			res.Diffs = append(res.Diffs, fmt.Sprintf("connection %s → %s: bad address", c.Client, c.Server))
			continue
		}
		proto := uint8(6)
		if c.Proto == "udp" {
			proto = 17
		}
		k := tuple{proto, cl, sv}
		var got counts
		found := false
		if s := seen[k]; s != nil {
			got.fp, got.fb, got.rp, got.rb = got.fp+s.fp, got.fb+s.fb, got.rp+s.rp, got.rb+s.rb
			found, used[k] = true, true
		}
		rk := tuple{proto, sv, cl}
		if s := seen[rk]; s != nil { // recorded the other way round
			got.fp, got.fb, got.rp, got.rb = got.fp+s.rp, got.fb+s.rb, got.rp+s.fp, got.rb+s.fb
			found, used[rk] = true, true
		}
		name := fmt.Sprintf("%s %s → %s", c.Proto, c.Client, c.Server)
		if !found {
			res.Diffs = append(res.Diffs, name+": no record")
			continue
		}
		var d []string
		if got.fp != c.FwdPkts || got.rp != c.RevPkts {
			d = append(d, fmt.Sprintf("packets sent %d/%d, seen %d/%d", c.FwdPkts, c.RevPkts, got.fp, got.rp))
		}
		if c.Exact && (got.fb != c.FwdIPBytes || got.rb != c.RevIPBytes) {
			d = append(d, fmt.Sprintf("IP bytes sent %d/%d, seen %d/%d", c.FwdIPBytes, c.RevIPBytes, got.fb, got.rb))
		}
		if len(d) > 0 {
			res.Diffs = append(res.Diffs, name+": "+strings.Join(d, ", "))
			continue
		}
		res.Matched++
	}
	var extra []string
	for k := range seen {
		if !used[k] {
			extra = append(extra, fmt.Sprintf("unexpected flow proto %d %s → %s", k.proto, k.src, k.dst))
		}
	}
	sort.Strings(extra)
	res.Diffs = append(res.Diffs, extra...)
	const maxDiffs = 50
	if len(res.Diffs) > maxDiffs {
		n := len(res.Diffs) - maxDiffs
		res.Diffs = append(res.Diffs[:maxDiffs], fmt.Sprintf("... and %d more", n))
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], " | ")
}
