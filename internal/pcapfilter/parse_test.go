package pcapfilter

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/craft"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
)

// reachable reports an instruction no path from the start reaches.
func reachable(prog []Instruction) error {
	seen := make([]bool, len(prog))
	seen[0] = true
	for pc, ins := range prog {
		if !seen[pc] {
			return fmt.Errorf("dead code at instruction %d (%v)", pc, ins)
		}
		switch {
		case isRet(ins.Op):
		case isJA(ins.Op):
			seen[pc+1+int(ins.K)] = true
		case isCondJump(ins.Op):
			seen[pc+1+int(ins.Jt)], seen[pc+1+int(ins.Jf)] = true, true
		default:
			seen[pc+1] = true
		}
	}
	return nil
}

func mustCompile(t testing.TB, expr string, link LinkType) []Instruction {
	t.Helper()
	p, err := Compile(expr, link, 0)
	if err != nil {
		t.Fatalf("Compile(%q): %v", expr, err)
	}
	return p
}

// verdict runs prog over frame, failing the test on an interpreter error.
func verdict(t testing.TB, prog []Instruction, frame []byte, m meta) bool {
	t.Helper()
	v, err := run(prog, frame, m)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, disasm(prog))
	}
	return v != 0
}

func ethFrame(src, dst string, proto uint8, sport, dport uint16) []byte {
	p := craft.Packet{Link: packet.LinkEthernet, Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst),
		Proto: proto, SrcPort: sport, DstPort: dport}
	return p.Append(nil)
}

func TestEmptyAcceptsAll(t *testing.T) {
	for _, e := range []string{"", "   ", "\t\n"} {
		p := mustCompile(t, e, LinkEthernet)
		if want := []Instruction{{Op: 0x06, K: DefaultSnaplen}}; !slices.Equal(p, want) {
			t.Errorf("Compile(%q) = %v, want %v", e, p, want)
		}
	}
	p, err := Compile("tcp", LinkRaw, 1500)
	if err != nil {
		t.Fatal(err)
	}
	// The accept return carries the snap length (tcpdump -ddd: "6 0 0 1500").
	if !slices.Contains(p, Instruction{Op: 6, K: 1500}) || !slices.Contains(p, Instruction{Op: 6, K: 0}) {
		t.Errorf("want ret #1500 and ret #0 in %v", p)
	}
}

// TestPrecedence: pcap-filter(7) gives "and" and "or" equal precedence,
// left to right, and "not" binds tightest.
func TestPrecedence(t *testing.T) {
	tcp80 := ethFrame("10.0.0.1", "10.0.0.2", flow.ProtoTCP, 1234, 80)
	udp53 := ethFrame("10.0.0.1", "10.0.0.2", flow.ProtoUDP, 1234, 53)
	udp80 := ethFrame("10.0.0.1", "10.0.0.2", flow.ProtoUDP, 1234, 80)
	cases := []struct {
		expr  string
		frame []byte
		want  bool
	}{
		{"tcp or udp and port 53", tcp80, false}, // (tcp or udp) and port 53
		{"tcp or (udp and port 53)", tcp80, true},
		{"port 53 and udp or tcp", tcp80, true}, // (port 53 and udp) or tcp
		{"not tcp and udp", udp53, true},        // (not tcp) and udp
		{"not tcp and udp", tcp80, false},
		{"not (tcp and port 80)", udp80, true},
		{"not tcp and port 80", udp80, true},
		{"not udp or port 53", udp53, true}, // (not udp) or port 53
		{"not udp or port 53", udp80, false},
		{"! udp || port 53", udp80, false},
	}
	for _, c := range cases {
		if got := verdict(t, mustCompile(t, c.expr, LinkEthernet), c.frame, meta{}); got != c.want {
			t.Errorf("%q: got %v, want %v", c.expr, got, c.want)
		}
	}
}

// TestEquivalentSpellings: qualifier inheritance and alternative spellings
// must produce exactly the program of the spelled-out form.
func TestEquivalentSpellings(t *testing.T) {
	pairs := [][2]string{
		{"host 1.2.3.4 or 5.6.7.8", "host 1.2.3.4 or host 5.6.7.8"},
		{"tcp dst port 80 or 443", "tcp dst port 80 or tcp dst port 443"},
		{"port 80 and not 443", "port 80 and not port 443"},
		{"port (80 or 443)", "(port 80 or port 443)"},
		{"host (1.2.3.4 or 5.6.7.8) and tcp", "(host 1.2.3.4 or host 5.6.7.8) and tcp"},
		{"not port 80 and 443", "not port 80 and port 443"},
		{"port 80 and (tcp) or 443", "port 80 and tcp or port 443"},
		{"src net 10.0.0.0/8 or 192.168.0.0/16", "src net 10.0.0.0/8 or src net 192.168.0.0/16"},
		{"ip6 net fe80::/10 or 2001:db8::/32", "ip6 net fe80::/10 or ip6 net 2001:db8::/32"},
		{"ip proto 6 or 17", "ip proto 6 or ip proto 17"},
		{"src or dst host 1.2.3.4", "host 1.2.3.4"},
		{"dst or src port 80", "port 80"},
		{"src 1.2.3.4", "src host 1.2.3.4"},
		{"tcp && !udp || icmp", "tcp and not udp or icmp"},
		{"ip[0] == 0x45", "ip[0] = 69"},
		{"ip[0] = 0105", "ip[0] = 69"},
		{"tcp[tcpflags] & tcp-syn != 0", "tcp[13] & 2 != 0"},
		{"icmp[icmptype] = icmp-echo", "icmp[0] = 8"},
		{"net 10", "net 10.0.0.0/8"},
		{"net 10.1", "net 10.1.0.0/16"},
		{"net 10.1.0.0 mask 255.255.0.0", "net 10.1.0.0/16"},
		{"portrange 20-10", "portrange 10-20"},
		{"port http", "tcp port 80"},
		{"ether proto \\ip", "ip"},
		{"ip proto \\udp", "ip proto 17"},
		{"less 100", "len <= 100"},
		{"greater 100", "len >= 100"},
		{"HOST 1.2.3.4", "host 1.2.3.4"},
		{"ether host 1:2:3:4:5:6", "ether host 01:02:03:04:05:06"},
		{"ether host 0102.0304.0506", "ether host 01:02:03:04:05:06"},
	}
	for _, p := range pairs {
		a, b := mustCompile(t, p[0], LinkEthernet), mustCompile(t, p[1], LinkEthernet)
		if !slices.Equal(a, b) {
			t.Errorf("%q and %q compile differently:\n%s\nvs\n%s", p[0], p[1], disasm(a), disasm(b))
		}
	}
}

func TestSyntaxErrors(t *testing.T) {
	cases := []struct {
		expr  string
		link  LinkType
		pos   int
		token string
		msg   string
	}{
		{"tcp prot 80", LinkEthernet, 4, "prot", `unknown keyword; did you mean "proto"?`},
		{"hots 1.2.3.4", LinkEthernet, 0, "hots", `did you mean "host"?`},
		{"tcp and udpp", LinkEthernet, 8, "udpp", `did you mean "udp"?`},
		{"frobnicate", LinkEthernet, 0, "frobnicate", "unknown keyword"},
		{"host", LinkEthernet, 4, "", "expected a host value"},
		{"port 99999", LinkEthernet, 5, "99999", "illegal port number 99999 > 65535"},
		{"ip[0:3] = 1", LinkEthernet, 5, "3", "data size must be 1, 2, or 4"},
		{"ip[0] / 0 = 1", LinkEthernet, 6, "/", "division by zero"},
		{"ip[0] << 32 = 1", LinkEthernet, 6, "<<", "shift by more than 31 bits"},
		{"gateway 1.2.3.4", LinkEthernet, 0, "gateway", `"gateway" is not supported`},
		{"ip and decnet host 1.2", LinkEthernet, 7, "decnet", `"decnet" is not supported`},
		{"mpls 100", LinkEthernet, 0, "mpls", `"mpls" is not supported`},
		{"ether host 1.2.3.4", LinkEthernet, 11, "1.2.3.4", "need an Ethernet (MAC) address"},
		{"host 01:02:03:04:05:06", LinkEthernet, 5, "01:02:03:04:05:06", "non-ether expression"},
		{"(tcp", LinkEthernet, 4, "", `expected ")"`},
		{"tcp)", LinkEthernet, 3, ")", "unbalanced parenthesis"},
		{"1.2.3.4", LinkEthernet, 0, "1.2.3.4", `needs a qualifier, e.g. "host 1.2.3.4"`},
		{"tcp and 80", LinkEthernet, 8, "80", "there is none to repeat"},
		{"host foo.example", LinkEthernet, 5, "foo.example", "host names are not resolved"},
		{"arp", LinkRaw, 0, "arp", "needs an Ethernet link"},
		{"ether src 1:2:3:4:5:6", LinkRaw, 10, "1:2:3:4:5:6", "needs an Ethernet link"},
		{"ether[0] = 1", LinkRaw, 0, "ether", "needs an Ethernet link"},
		{"vlan", LinkRaw, 0, "vlan", "carries no VLAN tags"},
		{"broadcast", LinkRaw, 0, "broadcast", "needs an Ethernet link"},
		{"ip proto 300", LinkEthernet, 9, "300", "IP protocol must be 0..255"},
		{"net 10.0.0.1/8", LinkEthernet, 4, "10.0.0.1", "non-network bits set"},
		{"host 10.0.0.0/8", LinkEthernet, 13, "/", "networks only"},
		{"udp port ssh", LinkEthernet, 9, "ssh", "port 'ssh' is tcp"},
		{"ip port 80", LinkEthernet, 8, "80", "illegal qualifier of 'port'"},
		{"tcp host 1.2.3.4", LinkEthernet, 9, "1.2.3.4", "'tcp' modifier applied to ip host"},
		{"ip host ::1", LinkEthernet, 8, "::1", "'ip' modifier applied to ip6 host"},
		{"vlan 5000", LinkEthernet, 5, "5000", "VLAN ID must be 0..4095"},
		{"ip[0] =", LinkEthernet, 7, "", "expected a number"},
		{"tcp port 80 &", LinkEthernet, 12, "&", `expected "and" or "or"`},
		{"port 0x", LinkEthernet, 5, "0x", "invalid number"},
		{"port 99999999999", LinkEthernet, 5, "99999999999", "does not fit in 32 bits"},
		{"tcp # comment", LinkEthernet, 4, "#", "unexpected character"},
		{"ip[4294967295] = 1", LinkEthernet, 3, "4294967295", "offset out of range"},
		{"ether proto 0x809b", LinkEthernet, 12, "0x809b", "not supported"},
		{"ether", LinkEthernet, 0, "ether", "needs a qualifier"},
		{"port domain-s-x", LinkEthernet, 5, "domain-s-x", "unknown port name"},
		{"portrange 1-2-3", LinkEthernet, 10, "1-2-3", "N-M"},
	}
	for _, c := range cases {
		_, err := Compile(c.expr, c.link, 0)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: got %v, want a *SyntaxError", c.expr, err)
			continue
		}
		if se.Pos != c.pos || se.Token != c.token || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("%q: got %v (pos %d, token %q), want pos %d token %q msg containing %q", c.expr, err, se.Pos, se.Token, c.pos, c.token, c.msg)
		}
	}
	// The message format points at the token.
	_, err := Compile("tcp prot 80", LinkEthernet, 0)
	if want := `filter: at 4 ("prot"): unknown keyword; did you mean "proto"?`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	_, err = Compile("host", LinkEthernet, 0)
	if want := "filter: at 4 (end of input): expected a host value"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

// TestPortLoadsSkipFragments: a port test must not read "ports" from a
// later IPv4 fragment's payload (libpcap checks the fragment offset).
func TestPortLoadsSkipFragments(t *testing.T) {
	p := craft.Packet{Link: packet.LinkEthernet, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		Proto: flow.ProtoUDP, SrcPort: 53, DstPort: 53, Body: make([]byte, 1200)}
	frags := p.Fragments(500)
	if len(frags) != 3 {
		t.Fatalf("want 3 fragments, got %d", len(frags))
	}
	// Make the second fragment's payload start with bytes that look like port 53.
	later := append([]byte(nil), frags[1].Frame...)
	later[34], later[35], later[36], later[37] = 0, 53, 0, 53
	prog := mustCompile(t, "udp port 53", LinkEthernet)
	if !verdict(t, prog, frags[0].Frame, meta{}) {
		t.Error("first fragment: want accept")
	}
	if verdict(t, prog, later, meta{}) {
		t.Error("later fragment with port-like bytes: want reject")
	}
	if !verdict(t, mustCompile(t, "udp", LinkEthernet), later, meta{}) {
		t.Error(`"udp" matches every fragment (protocol field), want accept`)
	}
}
