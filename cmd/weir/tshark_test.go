package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// dirKey is one direction of a conversation: what both tshark and weir can
// be reduced to without sharing any code. ICMP carries no ports; its flows
// between one pair of hosts add up in one dirKey on both sides.
type dirKey struct {
	proto        uint8
	src, dst     netip.Addr
	sport, dport uint16
}

type counts struct{ packets, bytes uint64 }

func tshark(t *testing.T, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tshark not installed; run scripts/deps.sh (make test does): CI must not skip the independent cross-check")
		}
		t.Skip("tshark not installed; run scripts/deps.sh (make test does)")
	}
	cmd := exec.Command(bin, append([]string{"-n", "-r"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// weirDirs reduces weir's JSON records to per-direction counts.
func weirDirs(t *testing.T, recs []jsonRecord) map[dirKey]counts {
	m := map[dirKey]counts{}
	for i := range recs {
		r := &recs[i]
		k := r.key(t)
		fwd := dirKey{k.Proto, k.Src(), k.Dst(), k.SrcPort, k.DstPort}
		rev := dirKey{k.Proto, k.Dst(), k.Src(), k.DstPort, k.SrcPort}
		c := m[fwd]
		c.packets += r.Packets
		c.bytes += r.Bytes
		m[fwd] = c
		c = m[rev]
		c.packets += r.RevPackets
		c.bytes += r.RevBytes
		m[rev] = c
	}
	for k, c := range m {
		if c.packets == 0 {
			delete(m, k)
		}
	}
	return m
}

// TestTsharkPerPacketBytes decodes every packet with tshark (an independent
// dissector), sums IP lengths per direction in this test, and requires
// weir's packets and bytes to agree exactly for every direction of every flow.
//
// IP bytes come from ip.len, or 40 + ipv6.plen. IPv4 fragments are taken
// with reassembly off; a later fragment is attributed here, as weir does, by
// the (src, dst, id) of its first fragment. IPv6 fragments likewise, by the
// fragment header's identification.
func TestTsharkPerPacketBytes(t *testing.T) {
	path, _ := writeScenario(t, 1, false)
	fields := []string{"ip.src", "ip.dst", "ipv6.src", "ipv6.dst", "ip.len", "ipv6.plen", "ip.proto",
		"tcp.srcport", "tcp.dstport", "udp.srcport", "udp.dstport", "sctp.srcport", "sctp.dstport",
		"icmp.type", "icmpv6.type", "ip.flags.mf", "ip.frag_offset", "ip.id", "ipv6.fraghdr.ident", "ipv6.fraghdr.offset"}
	args := []string{path, "-o", "ip.defragment:FALSE", "-o", "ipv6.defragment:FALSE", "-T", "fields", "-E", "separator=|", "-E", "occurrence=f"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out := tshark(t, args...)
	want := map[dirKey]counts{}
	type fragID struct {
		src, dst netip.Addr
		id       string
	}
	fragPorts := map[fragID][2]uint16{}
	lines := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		lines++
		v := strings.Split(sc.Text(), "|")
		if len(v) != len(fields) {
			t.Fatalf("tshark line %q has %d fields, want %d", sc.Text(), len(v), len(fields))
		}
		get := func(name string) string {
			for i, f := range fields {
				if f == name {
					return v[i]
				}
			}
			panic(name)
		}
		num := func(name string) uint64 {
			s := get(name)
			if s == "" {
				return 0
			}
			n, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), map[bool]int{true: 16, false: 10}[strings.HasPrefix(s, "0x")], 64)
			if err != nil {
				t.Fatalf("field %s=%q: %v", name, s, err)
			}
			return n
		}
		var k dirKey
		var ipLen uint64
		if get("ip.src") != "" {
			k.src, k.dst = netip.MustParseAddr(get("ip.src")), netip.MustParseAddr(get("ip.dst"))
			ipLen = num("ip.len")
			k.proto = uint8(num("ip.proto"))
		} else {
			k.src, k.dst = netip.MustParseAddr(get("ipv6.src")), netip.MustParseAddr(get("ipv6.dst"))
			ipLen = 40 + num("ipv6.plen")
		}
		switch { // ICMP first: errors quote the offending packet's TCP/UDP header
		case get("icmp.type") != "":
			k.proto = flow.ProtoICMP
		case get("icmpv6.type") != "":
			k.proto = flow.ProtoICMPv6
		case get("tcp.srcport") != "":
			k.proto, k.sport, k.dport = flow.ProtoTCP, uint16(num("tcp.srcport")), uint16(num("tcp.dstport"))
		case get("udp.srcport") != "":
			k.proto, k.sport, k.dport = flow.ProtoUDP, uint16(num("udp.srcport")), uint16(num("udp.dstport"))
		case get("sctp.srcport") != "":
			k.proto, k.sport, k.dport = flow.ProtoSCTP, uint16(num("sctp.srcport")), uint16(num("sctp.dstport"))
		}
		// Fragments: remember the first one's ports, attribute the rest.
		id, first, later := "", false, false
		if get("ip.id") != "" && (num("ip.flags.mf") == 1 || num("ip.frag_offset") > 0) {
			id, first, later = "4/"+get("ip.id"), num("ip.frag_offset") == 0, num("ip.frag_offset") > 0
		}
		if get("ipv6.fraghdr.ident") != "" {
			id, first, later = "6/"+get("ipv6.fraghdr.ident"), num("ipv6.fraghdr.offset") == 0, num("ipv6.fraghdr.offset") > 0
		}
		fk := fragID{k.src, k.dst, id}
		if first {
			fragPorts[fk] = [2]uint16{k.sport, k.dport}
		}
		if later {
			p, ok := fragPorts[fk]
			if !ok {
				t.Fatalf("tshark shows a later fragment %v whose first fragment came not before it", fk)
			}
			k.sport, k.dport = p[0], p[1]
			if k.proto == 0 || k.proto == 44 {
				k.proto = flow.ProtoUDP // the scenario fragments UDP only
			}
		}
		c := want[k]
		c.packets++
		c.bytes += ipLen
		want[k] = c
	}
	if lines < 1000 {
		t.Fatalf("tshark decoded only %d packets", lines)
	}
	got := weirDirs(t, captureJSON(t, path))
	compareDirs(t, got, want, true)
}

func compareDirs(t *testing.T, got, want map[dirKey]counts, withBytes bool) {
	t.Helper()
	for k, w := range want {
		g := got[k]
		if g.packets != w.packets || (withBytes && g.bytes != w.bytes) {
			t.Errorf("%d %s:%d -> %s:%d: weir %d packets %d bytes, tshark %d packets %d bytes",
				k.proto, k.src, k.sport, k.dst, k.dport, g.packets, g.bytes, w.packets, w.bytes)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%d %s:%d -> %s:%d: weir has %d packets, tshark none", k.proto, k.src, k.sport, k.dst, k.dport, g.packets)
		}
	}
}

// TestTsharkConversations compares tshark's own conversation tables
// (-z conv,tcp/udp/sctp: exact frame counts per direction) with weir.
// Conversation byte columns are rounded (e.g. "73 kB") and count frame
// bytes, so bytes are checked by TestTsharkPerPacketBytes instead. With
// reassembly off, tshark files later fragments under no UDP conversation;
// weir counts every fragment in its flow, so fragmented flows are compared
// with tshark's count plus the later fragments (ip.frag_offset > 0) of that
// conversation's datagrams, which this test counts from tshark too.
func TestTsharkConversations(t *testing.T) {
	path, _ := writeScenario(t, 1, false)
	out := tshark(t, path, "-q", "-o", "ip.defragment:FALSE", "-o", "ipv6.defragment:FALSE",
		"-z", "conv,tcp", "-z", "conv,udp", "-z", "conv,sctp")
	want := map[dirKey]counts{}
	proto := uint8(0)
	rows := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "TCP Conversations"):
			proto = flow.ProtoTCP
		case strings.HasPrefix(line, "UDP Conversations"):
			proto = flow.ProtoUDP
		case strings.HasPrefix(line, "SCTP Conversations"):
			proto = flow.ProtoSCTP
		}
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "<->" {
			continue
		}
		a, errA := parseEndpoint(f[0])
		b, errB := parseEndpoint(f[2])
		if errA != nil || errB != nil {
			t.Fatalf("unparsable conversation row %q", line)
		}
		// Columns after the endpoints: <- frames, bytes (with unit), -> frames, bytes, ...
		// "<-" is B→A, "->" is A→B.
		rest := f[3:]
		n := func(i int) uint64 {
			v, err := strconv.ParseUint(rest[i], 10, 64)
			if err != nil {
				t.Fatalf("row %q: column %d=%q: %v", line, i, rest[i], err)
			}
			return v
		}
		ba, ab := n(0), n(3)
		want[dirKey{proto, a.Addr(), b.Addr(), a.Port(), b.Port()}] = counts{packets: ab}
		want[dirKey{proto, b.Addr(), a.Addr(), b.Port(), a.Port()}] = counts{packets: ba}
		rows++
	}
	if rows < 200 {
		t.Fatalf("tshark listed only %d conversations:\n%s", rows, out)
	}
	for k, c := range want {
		if c.packets == 0 {
			delete(want, k)
		}
	}
	// Later fragments, which tshark's conversations do not see.
	frag := tshark(t, path, "-o", "ip.defragment:FALSE", "-o", "ipv6.defragment:FALSE",
		"-Y", "(ip.frag_offset > 0) or (ipv6.fraghdr.offset > 0)", "-T", "fields", "-E", "separator=|",
		"-e", "ip.src", "-e", "ip.dst", "-e", "ipv6.src", "-e", "ipv6.dst")
	later := map[[2]netip.Addr]uint64{}
	for _, l := range strings.Split(strings.TrimSpace(string(frag)), "\n") {
		v := strings.Split(l, "|")
		if len(v) != 4 {
			continue
		}
		s, d := v[0], v[1]
		if s == "" {
			s, d = v[2], v[3]
		}
		later[[2]netip.Addr{netip.MustParseAddr(s), netip.MustParseAddr(d)}]++
	}
	if len(later) == 0 {
		t.Fatal("the scenario should contain fragments")
	}
	for k, c := range want {
		if k.proto == flow.ProtoUDP {
			c.packets += later[[2]netip.Addr{k.src, k.dst}]
			want[k] = c
		}
	}
	got := weirDirs(t, captureJSON(t, path))
	for k := range got {
		if k.proto != flow.ProtoTCP && k.proto != flow.ProtoUDP && k.proto != flow.ProtoSCTP {
			delete(got, k)
		}
	}
	compareDirs(t, got, want, false)
}

// parseEndpoint parses tshark's "addr:port", where IPv6 addresses are not
// bracketed ("2001:db8::1:443").
func parseEndpoint(s string) (netip.AddrPort, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return netip.AddrPort{}, fmt.Errorf("no port in %q", s)
	}
	a, err := netip.ParseAddr(s[:i])
	if err != nil {
		return netip.AddrPort{}, err
	}
	p, err := strconv.ParseUint(s[i+1:], 10, 16)
	return netip.AddrPortFrom(a, uint16(p)), err
}
