//go:build linux

package conntrack

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/nfnetlink"
	"github.com/weir-dev/weir/internal/testhost"
)

// capture rewrites testdata/ from a live kernel: go test -run TestDump -capture.
var capture = flag.Bool("capture", false, "rewrite testdata/ with messages captured from the kernel")

// trackedPair builds a test host pair where B tracks connections with
// accounting and timestamps on: an nftables rule with a ct expression
// makes the kernel hook conntrack into B's namespace.
func trackedPair(t testing.TB) *testhost.Pair {
	t.Helper()
	testhost.Skip(t)
	nft := testhost.Need(t, "nft", "nftables")
	pr := testhost.NewPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rules := "add table inet weirct; add chain inet weirct in { type filter hook input priority 0 ; } ; add rule inet weirct in ct state new counter"
	if out, err := pr.B.Exec(ctx, nft, rules); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	// Accounting is decided when an entry is created: set it before traffic.
	// /proc/sys/net resolves against the opening thread's namespace.
	err := pr.B.Do(func() error {
		for _, k := range []string{"nf_conntrack_acct", "nf_conntrack_timestamp"} {
			if err := os.WriteFile("/proc/sys/net/netfilter/"+k, []byte("1"), 0); err != nil {
				return fmt.Errorf("cannot enable %s in the test namespace: %w", k, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

// dump reads h's whole conntrack table with a Socket opened in h.
func dump(t testing.TB, h *testhost.Host) (conns []Conn, raw []byte) {
	t.Helper()
	s, err := Open(Config{Netns: h.Do})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.DumpRaw(unix.AF_UNSPEC, func(msg []byte) error {
		raw = append(raw, msg...)
		raw = append(raw, make([]byte, nfnetlink.Align(len(raw))-len(raw))...)
		var c Conn
		if err := Decode(&c, msg); err != nil {
			return err
		}
		conns = append(conns, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The same table through Dump (decoding inside the socket).
	n := 0
	if err := s.Dump(unix.AF_UNSPEC, func(*Conn) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Rejected != 0 || st.ENOBUFS != 0 || st.Foreign != 0 {
		t.Errorf("socket stats %+v: nothing should be rejected, lost or foreign", st)
	}
	if n < len(conns) { // entries may only be added between the dumps (none expire this fast)
		t.Errorf("second dump: %d entries, first: %d", n, len(conns))
	}
	return conns, raw
}

// find returns the entry whose original tuple is proto from src to dst:dport.
func find(conns []Conn, proto uint8, src, dst netip.Addr, dport uint16) []*Conn {
	var out []*Conn
	for i := range conns {
		o := &conns[i].Orig
		if o.Proto == proto && o.SrcAddr() == src && o.DstAddr() == dst && (dport == 0 || o.DstPort == dport) {
			out = append(out, &conns[i])
		}
	}
	return out
}

// checkReply checks that the reply tuple mirrors the original (no NAT).
func checkReply(t *testing.T, c *Conn) {
	t.Helper()
	o, r := c.Orig, c.Reply
	if r.Src != o.Dst || r.Dst != o.Src || r.SrcPort != o.DstPort || r.DstPort != o.SrcPort || r.Proto != o.Proto || r.V6 != o.V6 {
		t.Errorf("reply tuple %+v does not mirror original %+v", r, o)
	}
	if c.Status.SNAT() || c.Status.DNAT() || c.Status.Dying() {
		t.Errorf("status %#x: no NAT and not dying expected", c.Status)
	}
	if c.Has&(HasCountersOrig|HasCountersReply|HasStatus|HasID|HasTimeout|HasUse|HasTimestampStart) != HasCountersOrig|HasCountersReply|HasStatus|HasID|HasTimeout|HasUse|HasTimestampStart {
		t.Errorf("has %#x: counters, status, id, timeout, use and start time expected", c.Has)
	}
	if now := uint64(time.Now().UnixNano()); c.Start == 0 || c.Start > now || now-c.Start > uint64(5*time.Minute) {
		t.Errorf("start time %d not within the last minutes", c.Start)
	}
}

// TestDump sends known UDP datagrams, ICMP echoes and TCP connections from
// A to B, dumps B's conntrack table with Socket, and checks each entry's
// tuples and per-direction packets and IP-layer bytes exactly: UDP and ICMP
// against what was sent (IP header + L4 header + payload per packet), TCP
// against dumpcap's capture of B's interface dissected by tshark. When the
// conntrack tool is installed, its `conntrack -L -o extended` listing of B
// must agree entry by entry.
func TestDump(t *testing.T) {
	pr := trackedPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type udpFlow struct {
		v6                bool
		port, count, size int
	}
	udp := []udpFlow{{false, 5001, 7, 100}, {false, 5002, 1, 1}, {true, 5003, 13, 900}, {true, 5004, 3, 0}}
	for _, f := range udp {
		if _, _, err := testhost.SendUDP(ctx, pr.A, pr.B, f.v6, f.port, f.count, f.size); err != nil {
			t.Fatalf("udp %+v: %v", f, err)
		}
	}
	const echoes, echoSize, echoID = 4, 56, 0x4242
	for _, v6 := range []bool{false, true} {
		ping(t, pr.A, pr.B.Addr(v6), echoID, echoes, echoSize)
	}
	stopWitness := testhost.Dumpcap(t, pr.B)
	tcpPorts := map[uint16]bool{}
	for i, v6 := range []bool{false, true, false, true} {
		port, total := 6000+i, 1+i*70001
		if _, err := testhost.TCPTransfer(ctx, pr.A, pr.B, v6, port, total, 1000+i*3000); err != nil {
			t.Fatalf("tcp %d: %v", i, err)
		}
		tcpPorts[uint16(port)] = true
	}
	time.Sleep(200 * time.Millisecond) // the last FIN/ACKs reach the capture
	file := stopWitness()
	conns, raw := dump(t, pr.B)
	if *capture {
		writeCapture(t, "real.bin", raw)
	}
	for i := range conns {
		k, v := ourKey(&conns[i])
		t.Logf("entry: %s counters %s status %#x tcp state %d", k, v, conns[i].Status, conns[i].TCPState)
	}

	for _, f := range udp {
		got := find(conns, unix.IPPROTO_UDP, pr.A.Addr(f.v6), pr.B.Addr(f.v6), uint16(f.port))
		if len(got) != 1 {
			t.Errorf("udp %+v: %d entries", f, len(got))
			continue
		}
		c := got[0]
		checkReply(t, c)
		hdr := 20
		if f.v6 {
			hdr = 40
		}
		want := Counters{uint64(f.count), uint64(f.count * (hdr + 8 + f.size))}
		if c.CountersOrig != want || c.CountersReply != (Counters{}) {
			t.Errorf("udp %+v: counters %+v / %+v, want %+v / zero", f, c.CountersOrig, c.CountersReply, want)
		}
		if c.Orig.V6 != f.v6 || c.Family != map[bool]uint8{false: unix.AF_INET, true: unix.AF_INET6}[f.v6] {
			t.Errorf("udp %+v: v6 %v, family %d", f, c.Orig.V6, c.Family)
		}
	}

	for _, v6 := range []bool{false, true} {
		proto, req, rep, hdr := uint8(unix.IPPROTO_ICMP), uint8(8), uint8(0), 20
		if v6 {
			proto, req, rep, hdr = unix.IPPROTO_ICMPV6, 128, 129, 40
		}
		got := find(conns, proto, pr.A.Addr(v6), pr.B.Addr(v6), 0)
		if len(got) != 1 {
			t.Errorf("icmp v6=%v: %d entries", v6, len(got))
			continue
		}
		c := got[0]
		o, r := c.Orig, c.Reply
		if o.ICMPType != req || o.ICMPCode != 0 || o.ICMPID != echoID || r.ICMPType != rep || r.ICMPID != echoID || r.Src != o.Dst || r.Dst != o.Src {
			t.Errorf("icmp v6=%v: tuples %+v / %+v", v6, o, r)
		}
		want := Counters{echoes, echoes * uint64(hdr+8+echoSize)}
		if c.CountersOrig != want || c.CountersReply != want {
			t.Errorf("icmp v6=%v: counters %+v / %+v, want %+v both ways", v6, c.CountersOrig, c.CountersReply, want)
		}
	}

	witness := testhost.TsharkTCP(t, file, tcpPorts)
	for i, v6 := range []bool{false, true, false, true} {
		port := uint16(6000 + i)
		got := find(conns, unix.IPPROTO_TCP, pr.A.Addr(v6), pr.B.Addr(v6), port)
		w := witness[port]
		if len(got) != 1 || w == nil {
			t.Errorf("tcp %d: %d entries, witness %v", port, len(got), w)
			continue
		}
		c := got[0]
		checkReply(t, c)
		if c.CountersOrig != (Counters{w.Pkts, w.Bytes}) || c.CountersReply != (Counters{w.RPkts, w.RBytes}) {
			t.Errorf("tcp %d: counters %+v / %+v, tshark %d pkts %d bytes / %d pkts %d bytes",
				port, c.CountersOrig, c.CountersReply, w.Pkts, w.Bytes, w.RPkts, w.RBytes)
		}
		if c.Has&HasTCP == 0 || (c.TCPState != TCPTimeWait && c.TCPState != TCPClose) || !c.Status.Assured() {
			t.Errorf("tcp %d: state %d (has %#x), status %#x: TIME_WAIT or CLOSE and assured expected", port, c.TCPState, c.Has, c.Status)
		}
	}

	t.Run("conntrack_tool", func(t *testing.T) { compareTool(t, pr.B, conns) })
}

// compareTool checks every entry against `conntrack -L -o extended` run
// in h: the same tuples and per-direction packets and bytes. It skips when
// the tool is missing (fails under CI, where scripts/deps.sh installs it).
func compareTool(t *testing.T, h *testhost.Host, conns []Conn) {
	t.Helper()
	bin := testhost.Need(t, "conntrack", "conntrack")
	out, err := h.Exec(context.Background(), bin, "-L", "-o", "extended")
	if err != nil {
		t.Fatalf("conntrack -L: %v: %s", err, out)
	}
	tool := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if !strings.HasPrefix(line, "ipv") {
			continue
		}
		k, v := toolKey(line)
		tool[k] = v
		t.Logf("conntrack tool: %s", strings.TrimSpace(line))
	}
	if len(tool) != len(conns) {
		t.Errorf("conntrack tool lists %d entries, the dump %d:\n%s", len(tool), len(conns), out)
	}
	for _, c := range conns {
		k, v := ourKey(&c)
		if tool[k] != v {
			t.Errorf("entry %s: ours %s, conntrack tool %q", k, v, tool[k])
		}
	}
}

// toolKey reduces a conntrack -o extended line to the original tuple (key)
// and both directions' counters (value).
func toolKey(line string) (key, val string) {
	f := strings.Fields(line)
	seen := map[string]int{}
	var k, v []string
	if len(f) > 3 {
		k = append(k, f[3]) // protocol number
	}
	for _, w := range f {
		name, x, ok := strings.Cut(w, "=")
		if !ok {
			continue
		}
		seen[name]++
		switch name {
		case "src", "dst", "sport", "dport", "type", "code", "id":
			if seen[name] == 1 {
				k = append(k, w)
			}
		case "packets", "bytes":
			v = append(v, x)
		}
	}
	return strings.Join(k, " "), strings.Join(v, " ")
}

// ourKey is toolKey for a decoded entry.
func ourKey(c *Conn) (key, val string) {
	o := c.Orig
	k := []string{strconv.Itoa(int(o.Proto)), "src=" + o.SrcAddr().String(), "dst=" + o.DstAddr().String()}
	switch o.Proto {
	case unix.IPPROTO_ICMP, unix.IPPROTO_ICMPV6:
		k = append(k, fmt.Sprintf("type=%d", o.ICMPType), fmt.Sprintf("code=%d", o.ICMPCode), fmt.Sprintf("id=%d", o.ICMPID))
	default:
		k = append(k, fmt.Sprintf("sport=%d", o.SrcPort), fmt.Sprintf("dport=%d", o.DstPort))
	}
	return strings.Join(k, " "), fmt.Sprintf("%d %d %d %d", c.CountersOrig.Packets, c.CountersOrig.Bytes, c.CountersReply.Packets, c.CountersReply.Bytes)
}

// ping sends n ICMP (or ICMPv6) echo requests of size payload bytes with
// identifier id from h to dst over a raw socket, paced so every echo reply
// comes back before the next request.
func ping(t testing.TB, h *testhost.Host, dst netip.Addr, id uint16, n, size int) {
	t.Helper()
	err := h.Do(func() error {
		af, proto, typ := unix.AF_INET6, unix.IPPROTO_ICMPV6, byte(128)
		var sa unix.Sockaddr = &unix.SockaddrInet6{Addr: dst.As16()}
		if dst.Is4() {
			af, proto, typ = unix.AF_INET, unix.IPPROTO_ICMP, 8
			sa = &unix.SockaddrInet4{Addr: dst.As4()}
		}
		fd, err := unix.Socket(af, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for seq := range n {
			p := make([]byte, 8+size)
			p[0] = typ
			binary.BigEndian.PutUint16(p[4:], id)
			binary.BigEndian.PutUint16(p[6:], uint16(seq))
			if !dst.Is6() { // the kernel sums ICMPv6 itself
				binary.BigEndian.PutUint16(p[2:], checksum(p))
			}
			if err := unix.Sendto(fd, p, 0, sa); err != nil {
				return err
			}
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ping %v: %v", dst, err)
	}
}

// checksum is the Internet checksum (RFC 1071).
func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// writeCapture stores captured messages under testdata/ (gzip for .gz).
func writeCapture(t testing.TB, name string, raw []byte) {
	t.Helper()
	if strings.HasSuffix(name, ".gz") {
		var b bytes.Buffer
		z := gzip.NewWriter(&b)
		z.Write(raw)
		z.Close()
		raw = b.Bytes()
	}
	if err := os.WriteFile(filepath.Join("testdata", name), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote testdata/%s (%d bytes)", name, len(raw))
}
