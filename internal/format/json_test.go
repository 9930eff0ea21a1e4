package format

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

func rec(src, dst string, sp, dp uint16, proto uint8) flow.Record {
	var r flow.Record
	r.Key.SetSrc(netip.MustParseAddr(src))
	r.Key.SetDst(netip.MustParseAddr(dst))
	r.Key.SrcPort, r.Key.DstPort, r.Key.Proto = sp, dp, proto
	r.Packets, r.Bytes, r.RevPackets, r.RevBytes = 3, 180, 2, 3000
	r.TCPFlags, r.RevTCPFlags = flow.TCPSyn|flow.TCPAck|flow.TCPFin, flow.TCPSyn|flow.TCPAck
	r.Start = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano()
	r.End = r.Start + 1500*int64(time.Millisecond)
	r.EndReason = flow.ReasonEnd
	r.Iface = "eth0"
	return r
}

func TestJSONContract(t *testing.T) {
	recs := []flow.Record{
		rec("10.0.0.1", "10.0.0.2", 40000, 443, flow.ProtoTCP),
		rec("2001:db8::1", "2001:db8::2", 0, 0, flow.ProtoICMPv6),
	}
	recs[1].Key.ICMPType, recs[1].Key.ICMPCode = 128, 0
	recs[1].VLAN = 100                                                                    // tagged: "vlan" appears; untagged (recs[0]): it does not
	recs[1].DropPackets, recs[1].DropBytes, recs[1].DropReason = 7, 588, "NETFILTER_DROP" // drops: the drop fields appear
	recs[1].Sampling = 64                                                                 // sampled: "sampling" appears
	var buf bytes.Buffer
	j := NewJSON(&buf)
	if err := j.Write(recs); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2:\n%s", len(lines), buf.String())
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatalf("line 0 is not JSON: %v\n%s", err, lines[0])
	}
	want := map[string]any{
		"src_ip": "10.0.0.1", "dst_ip": "10.0.0.2", "src_port": 40000.0, "dst_port": 443.0, "proto": 6.0,
		"packets": 3.0, "bytes": 180.0, "rev_packets": 2.0, "rev_bytes": 3000.0,
		"tcp_flags": 19.0, "rev_tcp_flags": 18.0,
		"start": "2026-01-02T03:04:05.000000006Z", "end": "2026-01-02T03:04:06.500000006Z",
		"end_reason": "end", "iface": "eth0",
	}
	if len(m) != len(want) {
		t.Errorf("got %d fields, want %d: %v", len(m), len(want), m)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v (%T), want %v", k, m[k], m[k], v)
		}
	}
	m = nil
	if err := json.Unmarshal([]byte(lines[1]), &m); err != nil {
		t.Fatal(err)
	}
	if m["src_ip"] != "2001:db8::1" || m["icmp_type"] != 128.0 || m["icmp_code"] != 0.0 || m["proto"] != 58.0 || m["vlan"] != 100.0 {
		t.Errorf("icmpv6 record on VLAN 100: %v", m)
	}
	if m["sampling"] != 64.0 {
		t.Errorf("sampled record: sampling %v, want 64", m["sampling"])
	}
	if m["drop_packets"] != 7.0 || m["drop_bytes"] != 588.0 || m["drop_reason"] != "NETFILTER_DROP" {
		t.Errorf("record with drops: drop_packets %v, drop_bytes %v, drop_reason %v", m["drop_packets"], m["drop_bytes"], m["drop_reason"])
	}
	for _, k := range []string{"start", "end"} {
		ts, err := time.Parse(time.RFC3339Nano, m[k].(string))
		if err != nil || ts.UnixNano() != map[string]int64{"start": recs[1].Start, "end": recs[1].End}[k] {
			t.Errorf("%s=%v does not parse back to the record's time (%v)", k, m[k], err)
		}
	}
}

// TestJSONFlushesEachBatch: a batch is on the writer when Write returns,
// not only at Close (live capture piped into another program).
func TestJSONFlushesEachBatch(t *testing.T) {
	var buf bytes.Buffer
	j := NewJSON(&buf)
	if err := j.Write([]flow.Record{rec("10.0.0.1", "10.0.0.2", 1, 2, flow.ProtoUDP)}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("%d lines written before Close, want 1", n)
	}
}

func TestJSONEscapesInterfaceNames(t *testing.T) {
	for name, want := range map[string]string{
		`a"b`: `a"b`, `back\slash`: `back\slash`, "ctl\x00\x1f": "ctl\x00\x1f",
		"bad\xff\xfeutf8": "bad\ufffd\ufffdutf8", // each invalid byte becomes U+FFFD, as encoding/json does
		"ünï":             "ünï",
	} {
		r := rec("10.0.0.1", "10.0.0.2", 1, 2, flow.ProtoUDP)
		r.Iface = name
		b := AppendJSON(nil, &r)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("iface %q: invalid JSON %s: %v", name, b, err)
		}
		if m["iface"] != want {
			t.Errorf("iface %q came back as %q, want %q", name, m["iface"], want)
		}
	}
}

func TestAppendJSONDoesNotAllocate(t *testing.T) {
	plain := rec("2001:db8::1", "2001:db8::2", 5353, 53, flow.ProtoUDP)
	// Every optional field set: drops, sampling, NAT, verdict, mark, zone.
	full := natRec("10.0.0.1", "10.96.0.10", "192.0.2.7", "10.244.1.5")
	full.VLAN, full.DropPackets, full.DropBytes, full.DropReason, full.Sampling = 7, 1, 60, "NO_SOCKET", 10
	full.Verdict, full.Rule, full.Mark, full.Zone = flow.VerdictDeny, "weir-deny", 0xcafe, 3
	enrich(&full)
	for _, r := range []flow.Record{plain, full} {
		buf := make([]byte, 0, 1024)
		allocs := testing.AllocsPerRun(1000, func() { buf = AppendJSON(buf[:0], &r) })
		if allocs != 0 {
			t.Fatalf("AppendJSON: %v allocs per record, want 0 (%s)", allocs, buf)
		}
	}
}

// natRec is a TCP record from src to the service address vip, translated
// to snat (the initiator's address after SNAT, port 61000) and backend
// (after DNAT, port 8443).
func natRec(src, vip, snat, backend string) flow.Record {
	r := rec(src, vip, 40000, 443, flow.ProtoTCP)
	r.PostNAT = r.Key
	r.PostNAT.SetSrc(netip.MustParseAddr(snat))
	r.PostNAT.SetDst(netip.MustParseAddr(backend))
	r.PostNAT.SrcPort, r.PostNAT.DstPort = 61000, 8443
	return r
}

// TestJSONNATVerdictConntrack: the NAT fields appear only for translated
// records, verdict and rule only with a verdict, ct_mark and ct_zone only
// when not 0; in a fixed order after the others (IPv4 and IPv6).
func TestJSONNATVerdictConntrack(t *testing.T) {
	r := natRec("10.0.0.1", "10.96.0.10", "192.0.2.7", "10.244.1.5")
	r.Mark, r.Zone = 0x10, 2
	got := string(AppendJSON(nil, &r))
	const want = `"iface":"eth0","nat_src_ip":"192.0.2.7","nat_dst_ip":"10.244.1.5","nat_src_port":61000,"nat_dst_port":8443,"ct_mark":16,"ct_zone":2}`
	if !strings.HasSuffix(got, want) {
		t.Errorf("translated record:\n%s\nwant it to end\n%s", got, want)
	}
	r6 := natRec("2001:db8::1", "fd00::10", "2001:db8::1", "fd00::a:5")
	r6.Verdict, r6.Rule = flow.VerdictDeny, `deny "x"`
	got = string(AppendJSON(nil, &r6))
	const want6 = `"nat_src_ip":"2001:db8::1","nat_dst_ip":"fd00::a:5","nat_src_port":61000,"nat_dst_port":8443,"verdict":"deny","rule":"deny \"x\""}`
	if !strings.HasSuffix(got, want6) {
		t.Errorf("translated IPv6 deny record:\n%s\nwant it to end\n%s", got, want6)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(got), &m); err != nil || m["rule"] != `deny "x"` || m["ct_mark"] != nil {
		t.Errorf("not JSON, or the rule does not come back, or ct_mark 0 is written: %v %v", err, m)
	}
	// A deny flow with an empty rule still says so; a rule without a
	// verdict is not written (the record contract: rule goes with verdict).
	plain := rec("10.0.0.1", "10.0.0.2", 1, 2, flow.ProtoUDP)
	plain.Verdict = flow.VerdictDeny
	if got := string(AppendJSON(nil, &plain)); !strings.HasSuffix(got, `"iface":"eth0","verdict":"deny","rule":""}`) {
		t.Errorf("deny without rule: %s", got)
	}
	plain.Verdict, plain.Rule = flow.VerdictNone, "stray"
	if got := string(AppendJSON(nil, &plain)); !strings.HasSuffix(got, `"iface":"eth0"}`) {
		t.Errorf("no verdict: %s", got)
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	r := rec("10.1.2.3", "10.4.5.6", 40000, 443, flow.ProtoTCP)
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendJSON(buf[:0], &r)
	}
}

// BenchmarkAppendJSONEnriched: a record with both workloads and a service.
func BenchmarkAppendJSONEnriched(b *testing.B) {
	r := rec("10.1.2.3", "10.4.5.6", 40000, 443, flow.ProtoTCP)
	enrich(&r)
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendJSON(buf[:0], &r)
	}
}

// enrich sets every enrichment field of r.
func enrich(r *flow.Record) {
	r.SrcWorkload = &flow.Workload{Name: "web-1", Namespace: "shop", Node: "node-a"}
	r.DstWorkload = &flow.Workload{Name: "cart-0", Namespace: "shop", Node: "node-b"}
	r.Service = &flow.Service{Name: "shop/cart", Backends: "10.244.1.5:8443,10.244.2.6:8443", Group: "g1"}
	r.ServiceMatch = flow.ServiceMatchNAT
}

// TestJSONEnrichment: the workload and service fields, after all others,
// each omitted when empty; nil pointers write nothing.
func TestJSONEnrichment(t *testing.T) {
	r := rec("10.0.0.1", "10.0.0.2", 1, 2, flow.ProtoUDP)
	r.Mark = 5
	enrich(&r)
	got := string(AppendJSON(nil, &r))
	const want = `"ct_mark":5,"src_workload":"web-1","src_namespace":"shop","src_node":"node-a",` +
		`"dst_workload":"cart-0","dst_namespace":"shop","dst_node":"node-b",` +
		`"service":"shop/cart","service_backends":"10.244.1.5:8443,10.244.2.6:8443","service_group":"g1","service_match":"nat"}`
	if !strings.HasSuffix(got, want) {
		t.Errorf("enriched record:\n%s\nwant it to end\n%s", got, want)
	}
	// Partly known: empty strings and nil pointers are omitted.
	r.Mark = 0
	r.SrcWorkload = &flow.Workload{Name: `vm "a"`}
	r.DstWorkload = nil
	r.Service = &flow.Service{Name: "a/x,b/y"}
	r.ServiceMatch = flow.ServiceMatchAmbiguous
	got = string(AppendJSON(nil, &r))
	const want2 = `"iface":"eth0","src_workload":"vm \"a\"","service":"a/x,b/y","service_match":"ambiguous"}`
	if !strings.HasSuffix(got, want2) {
		t.Errorf("partly enriched record:\n%s\nwant it to end\n%s", got, want2)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(got), &m); err != nil || m["src_workload"] != `vm "a"` {
		t.Errorf("not JSON or the name does not come back: %v %v", err, m)
	}
	r.SrcWorkload, r.Service, r.ServiceMatch = nil, nil, flow.ServiceMatchNone
	if got := string(AppendJSON(nil, &r)); !strings.HasSuffix(got, `"iface":"eth0"}`) {
		t.Errorf("no enrichment: %s", got)
	}
}

// TestJSONNode: node follows iface when set (escaped like every string from
// outside) and is left out when empty, so records without it are unchanged.
func TestJSONNode(t *testing.T) {
	r := rec("10.0.0.1", "10.0.0.2", 1, 2, flow.ProtoUDP)
	if got := string(AppendJSON(nil, &r)); !strings.HasSuffix(got, `"iface":"eth0"}`) {
		t.Errorf("no node: %s", got)
	}
	r.Node = "node-\"7\"\n"
	got := string(AppendJSON(nil, &r))
	if !strings.HasSuffix(got, `"iface":"eth0","node":"node-\"7\"\u000a"}`) {
		t.Errorf("node: %s", got)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(got), &m); err != nil || m["node"] != r.Node {
		t.Errorf("node does not come back: %v %v", err, m)
	}
}

// TestJSONTunnel: tunnel_src and tunnel_dst follow iface (and vlan) only
// for flows keyed through a tunnel (--decap), as RFC 5952 addresses, with
// no allocation.
func TestJSONTunnel(t *testing.T) {
	r := rec("10.244.1.5", "10.244.2.7", 40000, 80, flow.ProtoTCP)
	r.VLAN = 12
	r.TunnelSrc, r.TunnelDst = netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	got := string(AppendJSON(nil, &r))
	if want := `"iface":"eth0","vlan":12,"tunnel_src":"192.0.2.1","tunnel_dst":"192.0.2.2"}`; !strings.HasSuffix(got, want) {
		t.Errorf("tunnel record:\n%s\nwant it to end\n%s", got, want)
	}
	r.VLAN = 0
	r.TunnelSrc, r.TunnelDst = netip.MustParseAddr("2001:db8:0:0:1::a"), netip.MustParseAddr("2001:db8::b")
	got = string(AppendJSON(nil, &r))
	if want := `"iface":"eth0","tunnel_src":"2001:db8::1:0:0:a","tunnel_dst":"2001:db8::b"}`; !strings.HasSuffix(got, want) {
		t.Errorf("IPv6 tunnel record:\n%s\nwant it to end\n%s", got, want)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(got), &m); err != nil || m["tunnel_dst"] != "2001:db8::b" {
		t.Errorf("not JSON: %v %v", err, m)
	}
	buf := make([]byte, 0, 1024)
	if allocs := testing.AllocsPerRun(1000, func() { buf = AppendJSON(buf[:0], &r) }); allocs != 0 {
		t.Errorf("%v allocs per record with a tunnel", allocs)
	}
	plain := rec("10.0.0.1", "10.0.0.2", 1, 2, flow.ProtoUDP)
	if s := string(AppendJSON(nil, &plain)); strings.Contains(s, "tunnel") {
		t.Errorf("plain record mentions a tunnel: %s", s)
	}
}
