//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/caps"
	"github.com/weir-dev/weir/internal/testhost"
)

// startIn starts weir in h's namespace and waits for want on stderr.
func startIn(t *testing.T, h *testhost.Host, bin, want string, args ...string) (*exec.Cmd, *lockedBuffer, *lockedBuffer) {
	t.Helper()
	var stdout, stderr lockedBuffer
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.Name, bin}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFor(t, 20*time.Second, fmt.Sprintf("%q", want), func() bool { return strings.Contains(stderr.String(), want) }, stderr.String)
	return cmd, &stdout, &stderr
}

// checkCaps checks that every thread of process pid has exactly want in
// its effective, permitted and bounding sets, nothing ambient, and
// no_new_privs.
func checkCaps(t *testing.T, pid int, want caps.Set) {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) < 2 {
		t.Fatalf("threads of %d: %v, %v", pid, tasks, err)
	}
	hex := fmt.Sprintf("%016x", uint64(want))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		for _, l := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(l, ":")
			v = strings.TrimSpace(v)
			switch k {
			case "CapEff", "CapPrm", "CapBnd":
				if v != hex {
					n, _ := strconv.ParseUint(v, 16, 64)
					t.Errorf("%s: %s %s, want %s", f, k, caps.Set(n), want)
				}
			case "CapAmb", "CapInh":
				if v != "0000000000000000" {
					t.Errorf("%s: %s %s, want none", f, k, v)
				}
			case "NoNewPrivs":
				if v != "1" {
					t.Errorf("%s: no_new_privs %s", f, v)
				}
			}
		}
	}
}

// jsonLines parses weir's JSON records.
func jsonLines(t *testing.T, out string) []jsonRecord {
	t.Helper()
	var recs []jsonRecord
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r jsonRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

// TestDropPrivilegesAFPacket: a live capture of every interface of a
// router keeps only cap_net_raw, on every thread, once its first rings are
// open; a host joined afterwards is captured all the same (its interface
// gets a ring after the drop), the store keeps writing without
// cap_dac_override, and the counts are exact. (The hub's lo is brought up
// for the metrics, which tell when the new interface is open.)
func TestDropPrivilegesAFPacket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("dropping capabilities needs root; CI runs this as root")
	}
	n := testhost.NewNet(t, testhost.Router, 1)
	bin := buildWeir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	if out, err := n.Hub.Exec(ctx, "ip", "link", "set", "lo", "up"); err != nil { // for the metrics
		t.Fatalf("lo up: %v: %s", err, out)
	}
	data := filepath.Join(t.TempDir(), "data")
	cmd, stdout, stderr := startIn(t, n.Hub, bin, "dropped every capability but cap_net_raw (to open the rings of interfaces that appear later)",
		"capture", "-i", "any", "--filter", "udp", "-o", "json", "--stats", "--data-dir", data)
	checkCaps(t, cmd.Process.Pid, caps.Of(caps.NetRaw))
	late, err := n.AddHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	port := n.HubIface(late)
	open := fmt.Sprintf("weir_capture_interface_open{iface=%q} 1", port)
	waitFor(t, 20*time.Second, "the new interface to be opened", func() bool { return strings.Contains(scrape(t, n.Hub, "/metrics"), open) }, stderr.String)
	const pkts = 300
	if sent, recv, err := testhost.SendUDP(ctx, late, n.Hosts[0], false, 40123, pkts, 200); err != nil || sent != pkts || recv != pkts {
		t.Fatalf("SendUDP: %d/%d: %v", sent, recv, err)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("weir: %v\n%s", err, stderr.String())
	}
	// The new interface's ring saw every packet; the flow (counted once,
	// at whichever interface was read first) has them all, in the store too.
	if want := fmt.Sprintf("  %-15s %d packets", port, pkts); !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "0 failed to open") {
		t.Errorf("stats lack %q (the interface that appeared after the drop):\n%s", want, stderr.String())
	}
	var got uint64
	for _, r := range jsonLines(t, stdout.String()) {
		if r.DstPort == 40123 {
			got += r.Packets
		}
	}
	q := queryJSON(t, bin, "query", "-d", data, "-o", "json", "dport", "dport = 40123")
	if got != pkts || len(q.Rows) != 1 || q.Rows[0].PacketsOut != pkts {
		t.Errorf("records have %d packets, the store %+v; want %d", got, q, pkts)
	}
}

// TestDropPrivilegesSources: the eBPF, NFLOG and collect paths keep what
// privileges.go says (eBPF: nothing on a kernel with TCX), on every
// thread, and still count traffic that arrives after the drop. With its
// data directory owned by another user (mode 0700), weir keeps
// cap_dac_override, says why, and the store is written.
func TestDropPrivilegesSources(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("dropping capabilities needs root; CI runs this as root")
	}
	nft := testhost.Need(t, "nft", "nftables")
	pr := testhost.NewPair(t)
	bin := buildWeir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	t.Run("ebpf", func(t *testing.T) {
		want, msg := caps.Set(0), "dropped every capability\n"
		if !caps.KernelAtLeast(6, 6) {
			want, msg = caps.Of(caps.NetAdmin, caps.BPF), "dropped every capability but cap_net_admin,cap_bpf"
		}
		cmd, stdout, stderr := startIn(t, pr.B, bin, "eBPF programs on 1 interfaces", "capture", "--source", "ebpf", "-i", pr.B.Iface,
			"--ebpf-evict-interval", "200ms", "-o", "json", "--data-dir", "off", "--metrics-addr", "off")
		if !strings.Contains(stderr.String(), msg) {
			t.Errorf("stderr lacks %q:\n%s", msg, stderr.String())
		}
		checkCaps(t, cmd.Process.Pid, want)
		const pkts = 200
		if sent, recv, err := testhost.SendUDP(ctx, pr.A, pr.B, false, 40124, pkts, 100); err != nil || sent != pkts || recv != pkts {
			t.Fatalf("SendUDP: %d/%d: %v", sent, recv, err)
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("weir: %v\n%s", err, stderr.String())
		}
		var got uint64
		for _, r := range jsonLines(t, stdout.String()) {
			if r.DstPort == 40124 {
				got += r.Packets
			}
		}
		if got != pkts {
			t.Errorf("%d packets counted after the drop, want %d\n%s", got, pkts, stderr.String())
		}
	})

	t.Run("nflog", func(t *testing.T) {
		rules := "add table inet weirpriv\nadd chain inet weirpriv in { type filter hook input priority 0 ; }\n" +
			`add rule inet weirpriv in udp dport 7779 log prefix "weir-priv " group 6 drop`
		if out, err := pr.B.Exec(ctx, nft, rules); err != nil {
			t.Fatalf("nft: %v: %s", err, out)
		}
		data := filepath.Join(t.TempDir(), "nobody")
		if err := os.Mkdir(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(data, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cmd, stdout, stderr := startIn(t, pr.B, bin, "reading the NFLOG groups", "capture", "--source", "nflog", "--nflog-group", "6",
			"-o", "json", "--data-dir", data, "--metrics-addr", "off")
		if want := "dropped every capability but cap_dac_override (nothing more is opened; cap_dac_override for " + data; !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
		checkCaps(t, cmd.Process.Pid, caps.Of(caps.DACOverride))
		testhost.SendDatagrams(t, pr.A, netip.AddrPortFrom(pr.B.Addr4, 7779), 5, 100)
		time.Sleep(500 * time.Millisecond) // the datagrams reach the NFLOG group
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("weir: %v\n%s", err, stderr.String())
		}
		recs := jsonLines(t, stdout.String())
		if len(recs) != 1 || recs[0].Packets != 5 || recs[0].DstPort != 7779 {
			t.Errorf("deny flows after the drop: %+v, want one of 5 packets", recs)
		}
		q := queryJSON(t, bin, "query", "-d", data, "-o", "json", "dport")
		if len(q.Rows) != 1 || q.Rows[0].PacketsOut != 5 {
			t.Errorf("the store (owned by another user) holds %+v", q)
		}
	})

	t.Run("collect", func(t *testing.T) {
		cmd, _, stderr := startIn(t, pr.B, bin, "dropped every capability\n", "collect", "--listen", "udp://127.0.0.1:0", "-o", "none",
			"--data-dir", filepath.Join(t.TempDir(), "data"))
		checkCaps(t, cmd.Process.Pid, 0)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("weir collect: %v\n%s", err, stderr.String())
		}
	})
}
