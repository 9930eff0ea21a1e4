package pcapfilter

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/craft"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
)

func TestNestingLimit(t *testing.T) {
	ok := strings.Repeat("(", MaxDepth) + "tcp" + strings.Repeat(")", MaxDepth)
	mustCompile(t, ok, LinkEthernet)
	for _, expr := range []string{
		strings.Repeat("(", MaxDepth+1) + "tcp" + strings.Repeat(")", MaxDepth+1),
		strings.Repeat("not ", 5000) + "tcp",
		strings.Repeat("(", 100000),
		"port " + strings.Repeat("(", 500) + "80",
		"ip[0] = " + strings.Repeat("-", 1000) + "1",
		"len = " + strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300),
	} {
		_, err := Compile(expr, LinkEthernet, 0)
		var se *SyntaxError
		if !errors.As(err, &se) || !strings.Contains(se.Msg, "nesting deeper than 100") && !strings.Contains(se.Msg, "longer than") {
			t.Errorf("%.40q...: got %v, want a nesting error", expr, err)
		}
	}
	// The 101st parenthesis is the one reported.
	_, err := Compile(strings.Repeat("(", MaxDepth+1)+"tcp", LinkEthernet, 0)
	var se *SyntaxError
	if !errors.As(err, &se) || se.Pos != MaxDepth || se.Token != "(" {
		t.Errorf("got %v, want the error at offset %d", err, MaxDepth)
	}
}

func TestLengthLimit(t *testing.T) {
	long := strings.Repeat(" ", MaxExprLen) + "tcp"
	_, err := Compile(long, LinkEthernet, 0)
	var se *SyntaxError
	if !errors.As(err, &se) || !strings.Contains(se.Msg, "longer than 65536 bytes") {
		t.Errorf("got %v, want a length error", err)
	}
	padded := strings.Repeat(" ", MaxExprLen-3) + "tcp"
	mustCompile(t, padded, LinkEthernet)
}

func TestTooLong(t *testing.T) {
	var terms []string
	for i := range 1000 {
		terms = append(terms, fmt.Sprintf("host 10.0.%d.%d", i/250, i%250))
	}
	_, err := Compile(strings.Join(terms, " or "), LinkEthernet, 0)
	if !errors.Is(err, ErrTooLong) {
		t.Errorf("1000 hosts: got %v, want ErrTooLong", err)
	}
	// A huge expression is cut off early, not built in full.
	huge := strings.Repeat("ip6 host 2001:db8::1 or ", 2700) + "tcp"
	if _, err := Compile(huge, LinkEthernet, 0); !errors.Is(err, ErrTooLong) {
		t.Errorf("huge: got %v, want ErrTooLong", err)
	}
}

func TestScratchMemoryLimit(t *testing.T) {
	// Each level of right-nested non-constant operands holds one scratch slot.
	expr := "ip[0] = ip[0]"
	for range 20 {
		expr += " + (ip[1]"
	}
	expr += strings.Repeat(")", 20)
	_, err := Compile(expr, LinkEthernet, 0)
	var se *SyntaxError
	if !errors.As(err, &se) || !strings.Contains(se.Msg, "too complex") {
		t.Errorf("got %v, want an expression-too-complex error", err)
	}
	// Left-nested chains reuse slots and compile.
	mustCompile(t, "ip[0]+ip[1]+ip[2]+ip[3]+ip[4]+ip[5]+ip[6]+ip[7]+ip[8]+ip[9]+ip[10]+ip[11]+ip[12]+ip[13]+ip[14]+ip[15]+ip[16]+ip[17] = ip[18]*ip[19]", LinkEthernet)
}

// TestLongOrChain: 200 hosts give a program far longer than the 255
// instructions a conditional jump can skip; trampolines must keep every
// branch right.
func TestLongOrChain(t *testing.T) {
	var hosts []string
	for i := range 200 {
		hosts = append(hosts, fmt.Sprintf("10.%d.%d.%d", i/100, i%100, i%7+1))
	}
	for _, link := range []LinkType{LinkEthernet, LinkRaw} {
		expr := "host " + strings.Join(hosts, " or ")
		prog := mustCompile(t, expr, link)
		if len(prog) < 1000 {
			t.Fatalf("%v: program of %d instructions; the test needs one with far jumps", link, len(prog))
		}
		if err := reachable(prog); err != nil {
			t.Error(err)
		}
		other := netip.MustParseAddr("192.0.2.1")
		for i, h := range hosts {
			a := netip.MustParseAddr(h)
			for _, fwd := range []bool{true, false} {
				src, dst := a, other
				if !fwd {
					src, dst = other, a
				}
				p := craft.Packet{Link: craftLink(link), Src: src, Dst: dst, Proto: flow.ProtoUDP, SrcPort: 1, DstPort: 2}
				if !verdict(t, prog, p.Append(nil), meta{}) {
					t.Errorf("%v: host %d (%s, src=%v) rejected", link, i, h, fwd)
				}
			}
		}
		for _, miss := range []string{"10.0.0.0", "10.1.99.7", "192.0.2.1", "10.2.0.1"} {
			p := craft.Packet{Link: craftLink(link), Src: netip.MustParseAddr(miss), Dst: other, Proto: flow.ProtoTCP}
			if verdict(t, prog, p.Append(nil), meta{}) {
				t.Errorf("%v: %s accepted", link, miss)
			}
		}
		if link == LinkEthernet {
			if !verdict(t, prog, arpFrame(0x0806, 1, hosts[199], "192.0.2.1"), meta{}) {
				t.Error("ARP from the last host rejected")
			}
			if verdict(t, prog, arpFrame(0x0806, 1, "192.0.2.9", "192.0.2.1"), meta{}) {
				t.Error("unrelated ARP accepted")
			}
		}
	}
}

// TestLongOrChainLibpcap compares the 200-host chain with libpcap too.
func TestLongOrChainLibpcap(t *testing.T) {
	tcpdump := needTcpdump(t)
	var hosts []string
	for i := range 200 {
		hosts = append(hosts, fmt.Sprintf("10.0.%d.%d", i/50, i%50+1))
	}
	expr := "host " + strings.Join(hosts, " or ") + " or tcp port 80 or 443"
	ours := mustCompile(t, expr, LinkEthernet)
	theirs, err := libpcapProgram(tcpdump, emptyPcap(t, 1), expr, true)
	if err != nil {
		t.Fatal(err)
	}
	corpus := ethernetCorpus()
	for i := 0; i < 200; i += 13 {
		p := craft.Packet{Link: packet.LinkEthernet, Src: netip.MustParseAddr(hosts[i]), Dst: netip.MustParseAddr("192.0.2.1"), Proto: flow.ProtoUDP}
		corpus = append(corpus, testFrame{data: p.Append(nil), desc: "chain host"})
	}
	accepted := 0
	for _, f := range corpus {
		got, want := verdict(t, ours, f.data, f.m), verdict(t, theirs, f.data, f.m)
		if got != want {
			t.Errorf("%s frame % x: ours %v, libpcap %v", f.desc, f.data[:min(40, len(f.data))], got, want)
		}
		if got {
			accepted++
		}
	}
	if accepted == 0 || accepted == len(corpus) {
		t.Errorf("accepted %d of %d: not discriminating", accepted, len(corpus))
	}
}

func craftLink(l LinkType) packet.LinkType {
	if l == LinkRaw {
		return packet.LinkRaw
	}
	return packet.LinkEthernet
}

func BenchmarkCompile(b *testing.B) {
	var hosts []string
	for i := range 200 {
		hosts = append(hosts, fmt.Sprintf("10.0.%d.%d", i/50, i%50+1))
	}
	for _, c := range []struct{ name, expr string }{
		{"tcp-port", "tcp port 443 or udp"},
		{"flags", "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0 and not src net 10.0.0.0/8"},
		{"200-hosts", "host " + strings.Join(hosts, " or ")},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compile(c.expr, LinkEthernet, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestAdversarialInputs: inputs that once made the lexer or the parser's
// lookahead quadratic; each must fail quickly with the right error.
func TestAdversarialInputs(t *testing.T) {
	cases := []struct {
		expr string
		msg  string // "" means ErrTooLong
	}{
		{"tcp and " + strings.Repeat("(", 60000), "nesting deeper than 100"},
		{strings.Repeat("a:", 30000), "unknown keyword"},
		{strings.Repeat("1:", 30000), "expected a comparison"},
		{strings.Repeat("not ", 16000), "nesting deeper than 100"},
		{"port 80 or " + strings.Repeat("not ", 16000), "nesting deeper than 100"},
		{strings.Repeat("1%", 10000) + "1=1", "nesting deeper than 100"},
		{strings.Repeat("tcp or ", 9000) + "udp", ""},
		{strings.Repeat("ip[0]+", 10000) + "1=1", ""},
		{"len = " + strings.Repeat("len+", 16000) + "1", ""},
	}
	for _, c := range cases {
		_, err := Compile(c.expr, LinkEthernet, 0)
		var se *SyntaxError
		switch {
		case c.msg == "" && !errors.Is(err, ErrTooLong):
			t.Errorf("%.20q...: got %v, want ErrTooLong", c.expr, err)
		case c.msg != "" && (!errors.As(err, &se) || !strings.Contains(se.Msg, c.msg)):
			t.Errorf("%.20q...: got %v, want %q", c.expr, err, c.msg)
		}
	}
}
