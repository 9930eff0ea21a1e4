package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/api"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/store"
)

// TestCaptureStoreQuery: a capture file replayed with --data-dir writes
// every record to the store, and 'weir query' gives back exactly the sums
// of the records the same capture printed as JSON.
func TestCaptureStoreQuery(t *testing.T) {
	path, _ := writeScenario(t, 5, false)
	dir := filepath.Join(t.TempDir(), "data")
	recs := captureJSON(t, path, "--data-dir", dir)
	if len(recs) == 0 {
		t.Fatal("no records")
	}
	type key struct {
		iface, sip, dip string
		sport, dport    uint16
		proto           uint8
	}
	want := map[key][5]uint64{}
	for _, r := range recs {
		k := key{*r.Iface, r.SrcIP, r.DstIP, r.SrcPort, r.DstPort, r.Proto}
		w := want[k]
		want[k] = [5]uint64{w[0] + 1, w[1] + r.Packets, w[2] + r.RevPackets, w[3] + r.Bytes, w[4] + r.RevBytes}
	}
	code, out, errs := runCLI("query", "-d", dir, "-o", "csv", "-n", "0", "iface,sip,dip,sport,dport,proto")
	if code != exitOK {
		t.Fatalf("query exit %d: %s", code, errs)
	}
	lines, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(lines[0], ","); got != "iface,sip,dip,sport,dport,proto,flows,packets_out,packets_in,bytes_out,bytes_in" {
		t.Fatalf("header %s", got)
	}
	got := map[key][5]uint64{}
	for _, l := range lines[1:] {
		var k key
		var c [5]uint64
		k.iface, k.sip, k.dip = l[0], l[1], l[2]
		fmt.Sscan(strings.Join(l[3:], " "), &k.sport, &k.dport, &k.proto, &c[0], &c[1], &c[2], &c[3], &c[4])
		got[k] = c
	}
	if len(got) != len(want) {
		t.Errorf("query gave %d groups, the capture %d", len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%+v: query %v, capture %v", k, got[k], w)
		}
	}

	// --list: every interface of the file, with its record count.
	code, out, errs = runCLI("query", "-d", dir, "--list", "-o", "json")
	if code != exitOK {
		t.Fatalf("--list exit %d: %s", code, errs)
	}
	var spans []api.IfaceSpan
	if err := json.Unmarshal([]byte(out), &spans); err != nil {
		t.Fatal(err)
	}
	per := map[string]int64{}
	for _, r := range recs {
		per[*r.Iface]++
	}
	if len(spans) != len(per) {
		t.Errorf("--list: %d interfaces, want %d", len(spans), len(per))
	}
	for _, s := range spans {
		if s.Flows != per[s.Iface] || s.Days != 1 || s.First.After(s.Last) {
			t.Errorf("--list %+v; capture had %d records", s, per[s.Iface])
		}
	}

	// A condition and a sort: the top talker by packets among TCP flows.
	code, out, errs = runCLI("query", "-d", dir, "-s", "packets", "-n", "1", "-o", "json", "sip", "proto", "=", "tcp")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		Rows []struct {
			SIP        string `json:"sip"`
			PacketsOut uint64 `json:"packets_out"`
			PacketsIn  uint64 `json:"packets_in"`
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	bySrc := map[string]uint64{}
	var best uint64
	for _, r := range recs {
		if r.Proto == 6 {
			bySrc[r.SrcIP] += r.Packets + r.RevPackets
			best = max(best, bySrc[r.SrcIP])
		}
	}
	if len(doc.Rows) != 1 || doc.Rows[0].PacketsOut+doc.Rows[0].PacketsIn != best || bySrc[doc.Rows[0].SIP] != best {
		t.Errorf("top TCP talker %+v; want one with %d packets (%v)", doc.Rows, best, bySrc)
	}
}

func TestQueryUsage(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(store.Config{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"query", "-d", dir}, exitUsage, "give the attributes to group by"},
		{[]string{"query", "-d", dir, "sip,colour"}, exitUsage, "group-by: unknown attribute"},
		{[]string{"query", "-d", dir, "sip", "dport", "=", "443", "and"}, exitUsage, "condition ends too early\n  dport = 443 and\n                 ^"},
		{[]string{"query", "-d", dir, "sip", "-c", "tcp", "udp"}, exitUsage, "not both"},
		{[]string{"query", "-d", dir, "-s", "size", "sip"}, exitUsage, "--sort"},
		{[]string{"query", "-d", dir, "-f", "-1h", "-t", "-2h", "sip"}, exitUsage, "must be before"},
		{[]string{"query", "-d", dir, "-f", "yesterday", "sip"}, exitUsage, "--from"},
		// Outside int64 nanoseconds: an error naming the flag, not an empty answer.
		{[]string{"query", "-d", dir, "-t", "2263-01-01", "sip"}, exitUsage, `--to: bad time: "2263-01-01" is outside the times the store holds (1677-09-21T00:12:43Z to 2262-04-11T23:47:16Z)`},
		{[]string{"query", "-d", dir, "-f", "1677-01-01", "sip"}, exitUsage, `--from: bad time: "1677-01-01" is outside`},
		{[]string{"query", "-d", dir, "-o", "xml", "sip"}, exitUsage, "want table, json or csv"},
		{[]string{"query", "-d", dir, "--resolution", "10ms", "sip"}, exitUsage, "at least 1s"},
		{[]string{"query", "-d", dir, "--list", "sip"}, exitUsage, "--list takes no"},
		{[]string{"query", "-d", filepath.Join(dir, "nope"), "sip"}, exitFailure, "no flow store at"},
		{[]string{"query", "-d", dir, "--live", "--live-url", "http://192.0.2.1:9464/flows/live", "sip"}, exitFailure, "not a loopback address"},
		{[]string{"query", "-d", dir, "--api-token-file", "tok", "sip"}, exitUsage, "go with --live"},
		{[]string{"query", "-d", dir, "--live", "--api-token-file", filepath.Join(dir, "nope"), "sip"}, exitUsage, "--api-token-file: bad token file"},
		{[]string{"collect", "--listen", "udp://127.0.0.1:0", "--data-dir", "off", "--metrics-addr", "0.0.0.0:0", "--metrics-public"}, exitUsage, "serves flows to the network; give --api-token-file FILE"},
		{[]string{"collect", "--listen", "udp://127.0.0.1:0", "--data-dir", "off", "--metrics-addr", "0.0.0.0:0"}, exitUsage, "pass --metrics-public and --api-token-file"},
		// An empty store answers with an empty result, not an error.
		{[]string{"query", "-d", dir, "sip"}, exitOK, ""},
		// A directory another capture holds is refused with a hint.
		{[]string{"capture", "--synthetic", "flows=10,packets=20", "-o", "none", "--data-dir", dir}, exitFailure, "another weir capture is writing there"},
		{[]string{"capture", "--synthetic", "flows=10,packets=20", "-o", "none", "--data-dir", dir, "--retention", "5x"}, exitUsage, "is not a duration"},
		{[]string{"capture", "--synthetic", "flows=10,packets=20", "-o", "none", "--data-dir", dir, "--max-size", "lots"}, exitUsage, "is not a size"},
		{[]string{"capture", "--synthetic", "flows=10,packets=20", "-o", "none", "--data-dir", dir + "x", "--time-precision", "0s"}, exitUsage, "--time-precision must be"},
	} {
		code, _, errs := runCLI(c.args...)
		if code != c.code || !strings.Contains(errs, c.err) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.err)
		}
	}
}

// TestCaptureRetentionFlags: --retention and --max-size reach the store,
// and days older than the retention are gone after the capture.
func TestCaptureRetentionFlags(t *testing.T) {
	dir := t.TempDir()
	// The synthetic source starts on 2026-01-01: far older than 1 day.
	code, _, errs := runCLI("capture", "--synthetic", "flows=100,packets=1000", "-o", "none", "--data-dir", dir, "--retention", "1d", "--stats")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "store: 100 records in 1 blocks") {
		t.Errorf("--stats lacks the store line:\n%s", errs)
	}
	s, err := store.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	bl, err := s.Blocks(0, 0, nil)
	if err != nil || len(bl) != 0 {
		t.Errorf("a day older than --retention 1d survived: %d blocks, %v", len(bl), err)
	}
	// Without retention the same day stays.
	dir2 := t.TempDir()
	if code, _, errs := runCLI("capture", "--synthetic", "flows=100,packets=1000", "-o", "none", "--data-dir", dir2); code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	s2, _ := store.OpenReadOnly(dir2)
	if bl, _ := s2.Blocks(0, 0, nil); len(bl) != 1 || bl[0].Rows != 100 || time.Unix(0, bl[0].MinStart).UTC().Year() != 2026 {
		t.Errorf("without retention: %+v", bl)
	}
}

// TestCaptureExport: --export sends the records as IPFIX to a loopback
// collector; --stats reports them; a TCP collector that is down costs
// counted drops, not the capture; an unknown scheme is a usage error.
func TestCaptureExport(t *testing.T) {
	l, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan int, 1)
	go func() {
		buf := make([]byte, 65536)
		n := 0
		for {
			_ = l.SetReadDeadline(time.Now().Add(2 * time.Second))
			k, err := l.Read(buf)
			if err != nil {
				got <- n
				return
			}
			if k >= 16 && buf[0] == 0 && buf[1] == 10 { // IPFIX version 10
				n++
			}
		}
	}()
	code, _, errs := runCLI("capture", "--synthetic", "flows=500,packets=5000", "-o", "none", "--stats",
		"--export", "ipfix+udp://"+l.LocalAddr().String())
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	msgs := <-got
	var recs, sent, refused int
	if _, err := fmt.Sscanf(errs[strings.Index(errs, "export: "):], "export: %d records in %d IPFIX messages", &recs, &sent); err != nil {
		t.Fatalf("no export line: %v\n%s", err, errs)
	}
	fmt.Sscanf(errs[strings.Index(errs, "; ")+2:], "%d records undelivered", &refused)
	if recs != 500 || sent != msgs || sent < 2 || refused != 0 {
		t.Errorf("stats say %d records in %d messages, %d undelivered; the collector got %d messages", recs, sent, refused, msgs)
	}
	// Port 1 on loopback: nothing listens, the dial is refused at once.
	code, _, errs = runCLI("capture", "--synthetic", "flows=50", "-o", "none", "--stats", "--export", "ipfix+tcp://127.0.0.1:1")
	if code != exitOK || !strings.Contains(errs, "to ipfix+tcp://127.0.0.1:1; 50 records undelivered (dial_failed 50), 0 send errors, 0 connects, ") ||
		!strings.Contains(errs, " failed dials") || strings.Count(errs, "weir: export to ipfix+tcp://127.0.0.1:1: cannot connect") != 1 {
		t.Errorf("tcp export to a closed port: exit %d, %s", code, errs)
	}
	if code, _, errs := runCLI("capture", "--synthetic", "flows=5", "-o", "none", "--export", "ipfix+sctp://127.0.0.1:1"); code != exitUsage || !strings.Contains(errs, "ipfix+tls://") {
		t.Errorf("sctp export: exit %d, %s", code, errs)
	}
}

// TestQueryDrops: 'weir query' groups and filters by drop_reason and
// sampling, ranks by the drop counters and prints them exactly; the help
// lists the new attributes and sorts; a drop sort with a direction is a
// usage error.
func TestQueryDrops(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(store.Config{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC).UnixNano()
	var recs []flow.Record
	for i, d := range []struct {
		drops, bytes uint64
		reason       string
		sampling     uint32
	}{{3, 180, "NO_SOCKET", 10}, {0, 0, "", 10}, {5, 300, "NETFILTER_DROP", 10}, {4, 400, "NO_SOCKET", 10}, {0, 0, "", 0}} {
		r := flow.Record{Packets: 1, Bytes: 60, DropPackets: d.drops, DropBytes: d.bytes, DropReason: d.reason, Sampling: d.sampling,
			Iface: "eth0", Start: at + int64(i)*int64(time.Second), End: at + int64(i)*int64(time.Second)}
		r.Key.SrcAddr, r.Key.DstAddr, r.Key.IPVersion, r.Key.Proto = netip.MustParseAddr("10.0.0.1").As16(), netip.MustParseAddr("10.0.0.2").As16(), 4, 17
		recs = append(recs, r)
	}
	if err := s.Write(recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-s", "drop_packets", "drop_reason,sampling"}, "drop_reason,sampling,flows,packets_out,packets_in,bytes_out,bytes_in,drop_packets,drop_bytes\n" +
			"NO_SOCKET,10,2,2,0,120,0,7,580\nNETFILTER_DROP,10,1,1,0,60,0,5,300\n,0,1,1,0,60,0,0,0\n,10,1,1,0,60,0,0,0\n"},
		{[]string{"-s", "drop_bytes", "sip", "drop_reason", "=", "no_socket", "and", "sampling", ">", "1"},
			"sip,flows,packets_out,packets_in,bytes_out,bytes_in,drop_packets,drop_bytes\n10.0.0.1,2,2,0,120,0,7,580\n"},
		{[]string{"sip", "sampling = 0"}, "sip,flows,packets_out,packets_in,bytes_out,bytes_in\n10.0.0.1,1,1,0,60,0\n"},
	} {
		code, out, errs := runCLI(append([]string{"query", "-d", dir, "-o", "csv"}, c.args...)...)
		if code != exitOK || out != c.want {
			t.Errorf("%v: exit %d, %s\n%s\nwant\n%s", c.args, code, errs, out, c.want)
		}
	}
	if code, _, errs := runCLI("query", "-d", dir, "-s", "drop_packets:in", "sip"); code != exitUsage || !strings.Contains(errs, "both directions") {
		t.Errorf("drop_packets:in: exit %d, %s", code, errs)
	}
	code, out, _ := runCLI("query", "--help")
	for _, w := range []string{"proto, drop_reason, sampling, nat_src_ip", "vlan drop_reason sampling nat_src_ip", "drop_packets or drop_bytes", "-s drop_packets drop_reason"} {
		if code != exitOK || !strings.Contains(out, w) {
			t.Errorf("help lacks %q (exit %d)", w, code)
		}
	}
}

// TestQueryNAT: 'weir query' groups and filters by the post-NAT
// addresses and ports, verdict, rule, conntrack mark and zone of stored
// records (IPv4 and IPv6); records not translated have empty NAT cells;
// the help lists the attributes.
func TestQueryNAT(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(store.Config{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC).UnixNano()
	var recs []flow.Record
	for i, d := range []struct {
		src, dst, nsrc, ndst string
		verdict              flow.Verdict
		rule                 string
		mark                 uint32
		zone                 uint16
	}{
		{"10.0.0.1", "10.96.0.10", "192.0.2.7", "10.244.1.5", 0, "", 16, 1},
		{"10.0.0.2", "10.96.0.10", "10.0.0.2", "10.244.1.6", 0, "", 0, 1},
		{"2001:db8::1", "fd00::10", "2001:db8::1", "fd00::a:5", 0, "", 0, 0},
		{"10.0.0.3", "10.0.0.9", "", "", flow.VerdictDeny, "weir-deny", 7, 0},
	} {
		r := flow.Record{Packets: uint64(1 + i), Bytes: 60, Verdict: d.verdict, Rule: d.rule, Mark: d.mark, Zone: d.zone,
			Iface: "eth0", Start: at + int64(i)*int64(time.Second), End: at + int64(i)*int64(time.Second)}
		r.Key.SetSrc(netip.MustParseAddr(d.src))
		r.Key.SetDst(netip.MustParseAddr(d.dst))
		r.Key.Proto, r.Key.SrcPort, r.Key.DstPort = 6, uint16(40000+i), 443
		if d.nsrc != "" {
			r.PostNAT = r.Key
			r.PostNAT.SetSrc(netip.MustParseAddr(d.nsrc))
			r.PostNAT.SetDst(netip.MustParseAddr(d.ndst))
			r.PostNAT.DstPort = 8443
		}
		recs = append(recs, r)
	}
	if err := s.Write(recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	const cols = "flows,packets_out,packets_in,bytes_out,bytes_in"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"nat_dst_ip,nat_dst_port"}, "nat_dst_ip,nat_dst_port," + cols + "\n,,1,4,0,60,0\nfd00::a:5,8443,1,3,0,60,0\n10.244.1.6,8443,1,2,0,60,0\n10.244.1.5,8443,1,1,0,60,0\n"},
		{[]string{"sip,nat_src_ip", "nat_dst_ip", "=", "10.244.0.0/16"}, "sip,nat_src_ip," + cols + "\n10.0.0.2,10.0.0.2,1,2,0,60,0\n10.0.0.1,192.0.2.7,1,1,0,60,0\n"},
		{[]string{"verdict,rule,ct_mark", "verdict = deny"}, "verdict,rule,ct_mark," + cols + "\ndeny,weir-deny,7,1,4,0,60,0\n"},
		{[]string{"ct_zone", "ct_mark != 7 and nat_dst_ip != \"\""}, "ct_zone," + cols + "\n0,1,3,0,60,0\n1,2,3,0,120,0\n"},
	} {
		code, out, errs := runCLI(append([]string{"query", "-d", dir, "-o", "csv", "-s", "packets"}, c.args...)...)
		if code != exitOK || out != c.want {
			t.Errorf("%v: exit %d, %s\n%s\nwant\n%s", c.args, code, errs, out, c.want)
		}
	}
	code, out, _ := runCLI("query", "--help")
	for _, w := range []string{"nat_dst_port, verdict, rule, ct_mark, ct_zone, src_workload", "nat_dst_ip nat_src_port nat_dst_port verdict rule ct_mark ct_zone and the", "service_group, service_match, or the presets", "nat_dst_ip = \"\""} {
		if code != exitOK || !strings.Contains(out, w) {
			t.Errorf("help lacks %q (exit %d)", w, code)
		}
	}
}
