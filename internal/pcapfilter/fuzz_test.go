package pcapfilter

import (
	"errors"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// FuzzCompile: any input either fails with a *SyntaxError pointing inside
// the input (or ErrTooLong), or yields a program that passes the kernel's
// checks, has no dead code, and runs over sample frames without an
// interpreter fault.
func FuzzCompile(f *testing.F) {
	for _, e := range diffExprs {
		f.Add(e.expr, false)
		f.Add(e.expr, true)
	}
	for _, s := range []string{
		"vlan 100 and tcp", "inbound", "outbound or vlan", "(((", ")))", "port (80 or (443 and not 8080))",
		"ip[ip[ip[0]]:4] = 1", "tcp[tcp[tcp[0]]] % 7 ^ 3 = -1", "len - len / 0x0 = 0", "\\tcp", "ether proto \\",
		"host 1.2.3.4/24", "net ::/200", "1:2:3:4:5:6:7:8:9", "not not not (not)", "src or dst or", "tcp and",
		"ip6[100:4] != len * len", "portrange 65535-0", "net 255.255.255.255/32", "host 0x7f000001",
	} {
		f.Add(s, false)
	}
	frames := [][]byte{
		ethFrame("10.0.0.1", "1.2.3.4", flow.ProtoTCP, 80, 443),
		ethFrame("2001:db8::1", "::1", flow.ProtoUDP, 53, 53),
		arpFrame(0x0806, 1, "10.0.0.1", "1.2.3.4"),
		{0x01, 0x02},
		nil,
	}
	f.Fuzz(func(t *testing.T, expr string, raw bool) {
		link := LinkEthernet
		if raw {
			link = LinkRaw
		}
		prog, err := Compile(expr, link, 0)
		if err != nil {
			var se *SyntaxError
			switch {
			case errors.Is(err, ErrTooLong):
			case errors.As(err, &se):
				if se.Pos < 0 || se.Pos > len(expr) || !strings.HasPrefix(expr[se.Pos:], se.Token) && !strings.HasPrefix(strings.ToLower(expr[se.Pos:]), se.Token) {
					t.Fatalf("%q: error %v does not point at its token", expr, err)
				}
			default:
				t.Fatalf("%q: unexpected error type %T: %v", expr, err, err)
			}
			return
		}
		if err := Validate(prog); err != nil {
			t.Fatalf("%q: %v\n%s", expr, err, disasm(prog))
		}
		if err := reachable(prog); err != nil {
			t.Fatalf("%q: %v\n%s", expr, err, disasm(prog))
		}
		for _, fr := range frames {
			for _, m := range []meta{{}, {vlanPresent: true, vlanTCI: 7, pktType: 4}} {
				if _, err := run(prog, fr, m); err != nil {
					t.Fatalf("%q: %v\n%s", expr, err, disasm(prog))
				}
			}
		}
	})
}
