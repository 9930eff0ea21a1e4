//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/testhost"
)

// TestEBPFCapture: weir capture --source ebpf runs in host B and watches
// both ends of the veth: B's own and, through --netns, A's. UDP flows of
// known sizes go from A to B over IPv4 and IPv6. Each flow comes out as
// one JSON record with exact packets and bytes, counted once, at A's end
// (named A/iface: the first interface the packets cross); the metrics show
// the duplicates at B's end and no loss; with --ebpf-drops the drop
// program loads and --stats counts drops; on SIGTERM weir exits 0 and
// leaves no program attached.
func TestEBPFCapture(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("eBPF needs root; CI runs this as root")
	}
	pr := testhost.NewPair(t)
	bin := buildWeir(t)
	var stdout, stderr lockedBuffer
	cmd := exec.Command("ip", "netns", "exec", pr.B.Name, bin, "capture", "--source", "ebpf", "-i", pr.A.Iface+","+pr.B.Iface,
		"--netns", pr.A.Name, "--ebpf-evict-interval", "100ms", "--ebpf-drops", "-o", "json", "--stats")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), "eBPF programs on 2 interfaces"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("weir did not start: %s", stderr.String())
		}
	}
	want4 := testhost.UDPFlows(t, pr.A, pr.B, false, 41000, 50)
	want6 := testhost.UDPFlows(t, pr.A, pr.B, true, 42000, 50)
	time.Sleep(300 * time.Millisecond) // a few drains
	body := scrape(t, pr.B, "/metrics")
	vals, err := metrics.ParseText(strings.NewReader(body))
	if err != nil {
		t.Fatalf("metrics: %v\n%s", err, body)
	}
	var pkts float64
	for _, w := range []map[uint16][2]uint64{want4, want6} {
		for _, c := range w {
			pkts += float64(c[0])
		}
	}
	if got := vals["weir_ebpf_duplicate_packets_total"]; got < pkts {
		t.Errorf("weir_ebpf_duplicate_packets_total = %v, want at least %v (every UDP packet seen again at B)", got, pkts)
	}
	if vals["weir_ebpf_lost_packets_total"] != 0 || vals["weir_ebpf_interfaces"] != 2 || vals[`weir_ebpf_evictions_total{reason="timer",source="hashmap"}`] < 2 ||
		vals["weir_ebpf_evict_duration_seconds_count"] < 2 {
		t.Errorf("metrics: lost %v, interfaces %v, timer drains %v, drain durations %v", vals["weir_ebpf_lost_packets_total"], vals["weir_ebpf_interfaces"], vals[`weir_ebpf_evictions_total{reason="timer",source="hashmap"}`], vals["weir_ebpf_evict_duration_seconds_count"])
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("weir exited with %v\n%s", err, stderr.String())
	}
	got := map[string]jsonRecord{}
	sc := bufio.NewScanner(strings.NewReader(stdout.String()))
	for sc.Scan() {
		var r jsonRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record %q: %v", sc.Text(), err)
		}
		if r.Proto != 17 {
			continue
		}
		k := fmt.Sprintf("%s %d", r.DstIP, r.DstPort)
		if _, dup := got[k]; dup {
			t.Errorf("flow %s in two records", k)
		}
		got[k] = r
	}
	for _, tc := range []struct {
		dst  string
		want map[uint16][2]uint64
	}{{pr.B.Addr4.String(), want4}, {pr.B.Addr6.String(), want6}} {
		for port, w := range tc.want {
			r, ok := got[fmt.Sprintf("%s %d", tc.dst, port)]
			if !ok || r.Packets != w[0] || r.Bytes != w[1] || r.Iface == nil || *r.Iface != pr.A.Name+"/"+pr.A.Iface {
				t.Errorf("flow to %s port %d: %+v, want %d packets %d bytes at %s/%s", tc.dst, port, r, w[0], w[1], pr.A.Name, pr.A.Iface)
			}
		}
	}
	if len(got) != len(want4)+len(want6) {
		t.Errorf("%d UDP records, want %d", len(got), len(want4)+len(want6))
	}
	for _, s := range []string{"0 lost", "drains      hashmap", "drops       "} {
		if !strings.Contains(stderr.String(), s) {
			t.Errorf("--stats lacks %q:\n%s", s, stderr.String())
		}
	}
	for _, h := range []*testhost.Host{pr.A, pr.B} {
		err := h.Do(func() error {
			ifc, err := net.InterfaceByName(h.Iface)
			if err != nil {
				return err
			}
			for _, a := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
				r, err := link.QueryPrograms(link.QueryOptions{Target: ifc.Index, Attach: a})
				if err != nil {
					return err
				}
				if len(r.Programs) != 0 {
					return fmt.Errorf("%d programs left on %s", len(r.Programs), h.Iface)
				}
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
}

// TestEBPFDropsQuery: drops reach the store and weir query. weir capture
// --source ebpf --ebpf-drops in host B stores its records; 30 datagrams
// from A to a closed port of B are dropped there (no socket). After
// shutdown, weir query groups the stored flows by drop_reason and shows
// NO_SOCKET with exactly those 30 drops and their bytes.
func TestEBPFDropsQuery(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("eBPF needs root; CI runs this as root")
	}
	pr := testhost.NewPair(t)
	bin := buildWeir(t)
	dir := t.TempDir()
	var stderr testhost.SyncBuffer
	cmd := exec.Command("ip", "netns", "exec", pr.B.Name, bin, "capture", "--source", "ebpf", "-i", pr.B.Iface,
		"--ebpf-drops", "--ebpf-evict-interval", "100ms", "-o", "none", "--data-dir", dir, "--metrics-addr", "off")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), "eBPF programs on 1 interface"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("weir did not start: %s", stderr.String())
		}
	}
	const n, size = 30, 100 // IP bytes per datagram: 100 + 8 + 20
	testhost.SendDatagrams(t, pr.A, netip.AddrPortFrom(pr.B.Addr4, 9), n, size)
	time.Sleep(300 * time.Millisecond) // a few drains
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("weir exited with %v\n%s", err, stderr.String())
	}
	code, out, errs := runCLI("query", "-d", dir, "-o", "json", "-n", "0", "drop_reason", "dport", "=", "9")
	if code != 0 {
		t.Fatalf("query exit %d: %s", code, errs)
	}
	var res struct{ Rows []map[string]any }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("query output %q: %v", out, err)
	}
	found := false
	for _, r := range res.Rows {
		if r["drop_reason"] == "NO_SOCKET" {
			found = true
			// Each datagram reached B's interface (counted) and was then dropped.
			if r["drop_packets"] != float64(n) || r["drop_bytes"] != float64(n*(size+28)) || r["packets_out"] != float64(n) {
				t.Errorf("NO_SOCKET row %v: want %d drop packets and %d drop bytes", r, n, n*(size+28))
			}
		}
	}
	if !found {
		t.Errorf("no NO_SOCKET row in %s", out)
	}
}
