package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/craft"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source/pcap"
)

// enrichPcap writes a capture of one short flow per case: each is a
// packet from src to dst and one back.
func enrichPcap(t *testing.T, flows []craft.Packet) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := pcap.NewWriter(&buf, packet.LinkEthernet, 65535)
	if err != nil {
		t.Fatal(err)
	}
	ts := int64(1_767_225_600e9)
	for _, p := range flows {
		p.Link = packet.LinkEthernet
		if p.Proto == flow.ProtoTCP {
			p.TCPFlags = flow.TCPSyn
		}
		back := p
		back.Src, back.Dst, back.SrcPort, back.DstPort = p.Dst, p.Src, p.DstPort, p.SrcPort
		if p.Proto == flow.ProtoTCP {
			back.TCPFlags = flow.TCPSyn | flow.TCPAck
		}
		for _, q := range []craft.Packet{p, back} {
			data := q.Append(nil)
			ts += 1e6
			if err := w.WritePacket(ts, len(data), data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "enrich.pcap")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCaptureEnrich replays a capture with --enrich examples/inventory.yaml
// -o json and checks the enrichment fields of each flow.
func TestCaptureEnrich(t *testing.T) {
	a := netip.MustParseAddr
	tcp := func(src string, sport uint16, dst string, dport uint16) craft.Packet {
		return craft.Packet{Src: a(src), Dst: a(dst), Proto: flow.ProtoTCP, SrcPort: sport, DstPort: dport, Payload: 10}
	}
	udp := func(src string, sport uint16, dst string, dport uint16) craft.Packet {
		p := tcp(src, sport, dst, dport)
		p.Proto = flow.ProtoUDP
		return p
	}
	cases := []struct {
		p    craft.Packet
		want map[string]any // the enrichment fields, absent ones included as absent
	}{
		{tcp("10.244.1.10", 40000, "10.96.0.80", 80), map[string]any{
			"src_workload": "client-0", "src_namespace": "shop", "src_node": "node-1",
			"service": "shop/web", "service_backends": "10.244.1.5:8080,10.244.2.7:8080", "service_group": "cluster-wide", "service_match": "vip"}},
		{tcp("10.244.1.10", 40001, "10.244.2.7", 8080), map[string]any{
			"src_workload": "client-0", "src_namespace": "shop", "src_node": "node-1",
			"dst_workload": "web-1", "dst_namespace": "shop", "dst_node": "node-2",
			"service": "shop/web", "service_backends": "10.244.2.7:8080", "service_group": "cluster-wide", "service_match": "backend"}},
		{udp("192.168.7.7", 5353, "10.96.0.10", 53), map[string]any{
			"src_workload": "office",
			"service":      "kube-system/kube-dns", "service_backends": "10.244.2.3:53", "service_group": "cluster-wide", "service_match": "vip"}},
		{tcp("fd00:10:244:1::5", 40000, "fd00:10:96::80", 80), map[string]any{
			"src_workload": "web-0", "src_namespace": "shop", "src_node": "node-1",
			"service": "shop/web", "service_backends": "[fd00:10:244:1::5]:8080,[fd00:10:244:2::7]:8080", "service_group": "cluster-wide", "service_match": "vip"}},
		{udp("10.244.2.200", 1000, "198.51.100.1", 2000), map[string]any{"src_workload": "node-2-pods", "src_node": "node-2"}},
		{tcp("198.51.100.1", 1000, "203.0.113.1", 443), map[string]any{}},
	}
	var flows []craft.Packet
	for _, c := range cases {
		flows = append(flows, c.p)
	}
	path := enrichPcap(t, flows)
	inv, err := filepath.Abs("../../examples/inventory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	args := []string{"capture", "--read", path, "-o", "json", "--enrich", inv}
	if code := run(args, &out, &errb); code != exitOK {
		t.Fatalf("weir %v: exit %d\n%s", args, code, errb.String())
	}
	got := map[string]map[string]any{} // "src_ip:src_port" → record
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("bad JSON line %q: %v", sc.Text(), err)
		}
		got[r["src_ip"].(string)+"|"+r["dst_ip"].(string)] = r
	}
	fields := []string{"src_workload", "src_namespace", "src_node", "dst_workload", "dst_namespace", "dst_node",
		"service", "service_backends", "service_group", "service_match"}
	for _, c := range cases {
		name := c.p.Src.String() + "|" + c.p.Dst.String()
		r := got[name]
		if r == nil {
			t.Errorf("%s: no record; got %v", name, got)
			continue
		}
		for _, f := range fields {
			if want, ok := c.want[f]; ok != (r[f] != nil) || (ok && r[f] != want) {
				t.Errorf("%s: %s = %v, want %v", name, f, r[f], want)
			}
		}
	}
}

// TestEnrichFlagErrors: a bad inventory is a command-line error naming the
// file and line, for capture and collect; the help lists the flags.
func TestEnrichFlagErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("workloads:\n  - name: a\n    ips: [10.0.0.300]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"capture", "--synthetic", "flows=1,packets=1", "-o", "none", "--enrich", bad},
		{"collect", "--listen", "udp://127.0.0.1:0", "--duration", "1ms", "-o", "none", "--enrich", bad},
	} {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), `bad.yaml:3: workload "a": "10.0.0.300" is not an address`) {
			t.Errorf("weir %s with a bad inventory: exit %d\n%s", args[0], code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"help", "capture"}, &out, &errb); code != exitOK ||
		!strings.Contains(out.String(), "--enrich file") || !strings.Contains(out.String(), "--enrich-reload duration") {
		t.Errorf("weir help capture: exit %d, no --enrich flags:\n%s", code, out.String())
	}
}
