package main

import (
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/ipfix"
	ipfixsink "github.com/weir-dev/weir/internal/sink/ipfix"
)

// TestCollectIPFIXPEN: enriched records exported under a PEN (IPv4 with
// every enterprise field, IPv6 with a few) and plain ones from weir
// capture --ipfix-pen reach weir collect --ipfix-pen over UDP on
// 127.0.0.1, which prints them in JSON with their workloads, service,
// rule, mark and zone; a PEN that is RFC 5103's or past 32 bits is a
// usage error, for capture and collect.
func TestCollectIPFIXPEN(t *testing.T) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	addr := c.LocalAddr().String()
	c.Close()
	pen := "32473" // RFC 5612: documentation and examples
	type result struct {
		code      int
		out, errs string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errs := runCLI("collect", "--listen", "udp://"+addr, "--ipfix-pen", pen, "--duration", "2s",
			"--metrics-addr", "off", "-o", "json", "--stats", "--data-dir", "off")
		done <- result{code, out, errs}
	}()
	time.Sleep(300 * time.Millisecond) // the collector binds
	if code, _, errs := runCLI("capture", "--synthetic", "flows=50,packets=500", "-o", "none", "--ipfix-pen", pen, "--export", "ipfix+udp://"+addr); code != exitOK {
		t.Fatalf("capture --ipfix-pen: exit %d\n%s", code, errs)
	}
	key := func(src, dst string) flow.Key {
		s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
		k := flow.Key{SrcAddr: s.As16(), DstAddr: d.As16(), SrcPort: 40000, DstPort: 443, Proto: flow.ProtoTCP, IPVersion: 4}
		if s.Is6() {
			k.IPVersion = 6
		}
		return k
	}
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).UnixNano()
	recs := []flow.Record{
		{Key: key("10.1.0.1", "10.96.0.10"), Packets: 3, Bytes: 180, Start: t0, End: t0, Iface: "eth0",
			SrcWorkload: &flow.Workload{Name: "web-1", Namespace: "shop", Node: "node-a"},
			DstWorkload: &flow.Workload{Name: "db-0", Namespace: "shop", Node: "node-b"},
			Service:     &flow.Service{Name: "shop/db", Backends: "10.1.0.9:5432", Group: "lbg"}, ServiceMatch: flow.ServiceMatchNAT,
			Verdict: flow.VerdictDeny, Rule: "deny-db", Mark: 0x4000_0001, Zone: 7}, // JSON shows a rule with its verdict
		{Key: key("fd00::1", "fd00::2"), Packets: 1, Bytes: 80, Start: t0, End: t0, Iface: "eth0",
			DstWorkload: &flow.Workload{Name: "gateway"}, Mark: 9},
	}
	x, err := ipfixsink.New(ipfixsink.Config{URL: "ipfix+udp://" + addr, PEN: ipfix.DocumentationPEN})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Write(recs); err != nil {
		t.Fatal(err)
	}
	x.Close()
	r := <-done
	if r.code != exitOK || !strings.Contains(r.errs, "records     52 flows") || !strings.Contains(r.errs, "bad_enterprise_field 0") {
		t.Fatalf("collect: exit %d\n%s", r.code, r.errs)
	}
	want := map[string]map[string]any{
		"10.1.0.1": {"src_workload": "web-1", "src_namespace": "shop", "src_node": "node-a", "dst_workload": "db-0",
			"dst_namespace": "shop", "dst_node": "node-b", "service": "shop/db", "service_backends": "10.1.0.9:5432",
			"service_group": "lbg", "service_match": "nat", "rule": "deny-db", "ct_mark": float64(0x4000_0001), "ct_zone": float64(7)},
		"fd00::1": {"dst_workload": "gateway", "ct_mark": float64(9)},
	}
	enrichedKeys := []string{"src_workload", "src_namespace", "src_node", "dst_workload", "dst_namespace", "dst_node",
		"service", "service_backends", "service_group", "service_match", "rule", "ct_mark", "ct_zone"}
	var n, seen int
	for _, line := range strings.Split(strings.TrimSpace(r.out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		n++
		w := want[m["src_ip"].(string)]
		if w != nil {
			seen++
		}
		for _, k := range enrichedKeys {
			if m[k] != w[k] {
				t.Errorf("record from %s: %s = %v, want %v", m["src_ip"], k, m[k], w[k])
			}
		}
	}
	if n != 52 || seen != 2 {
		t.Errorf("%d JSON records, %d enriched", n, seen)
	}
	for _, cmd := range []string{"capture", "collect"} {
		for _, bad := range []string{"29305", "4294967296"} {
			args := []string{cmd, "--ipfix-pen", bad, "--data-dir", "off"}
			if cmd == "capture" {
				args = append(args, "--synthetic", "flows=1,packets=1")
			} else {
				args = append(args, "--metrics-addr", "off")
			}
			if code, _, errs := runCLI(args...); code != exitUsage || !strings.Contains(errs, "--ipfix-pen") {
				t.Errorf("%s --ipfix-pen %s: exit %d, %s", cmd, bad, code, errs)
			}
		}
	}
}
