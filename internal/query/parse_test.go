package query

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"":                                     "",
		"   ":                                  "",
		"dport = 443":                          "dport = 443",
		"dport https":                          "dport = 443",
		"DPORT==https":                         "dport = 443",
		"tcp":                                  "proto = tcp",
		"proto 17 and not dport 53":            "proto = udp and dport != 53",
		"host 10.0.0.1":                        "host = 10.0.0.1",
		"net 10.0.0.0/8 || snet 2001:db8::/32": "host = 10.0.0.0/8 or sip = 2001:db8::/32",
		"not (sip = 10.0.0.1 or dport < 1024)": "sip != 10.0.0.1 and dport >= 1024",
		"!(port = 22)":                         "port != 22",
		"not port != 22":                       "port = 22",
		"not port < 1024":                      "not port < 1024",
		"port >= 1024 && (udp || icmp)":        "port >= 1024 and (proto = udp or proto = icmp)",
		"iface = 'eth0.100' and vlan > 0":      `iface = eth0.100 and vlan > 0`,
		`iface "a\"b" or iface 'and'`:          `iface = "a\"b" or iface = "and"`,
		"not not host ::1":                     "host = ::1",
		"dnet 10.1.0.0/16 and proto icmpv6":    "dip = 10.1.0.0/16 and proto = icmpv6",
	} {
		c, err := ParseCondition(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := c.String(); got != want {
			t.Errorf("%q = %q, want %q", in, got, want)
		}
		if again, err := ParseCondition(c.String()); err != nil || again.String() != c.String() {
			t.Errorf("%q: %q does not parse back to itself (%v)", in, c.String(), err)
		}
	}
}

// TestParseErrors: every mistake points at the offending token.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		in, tok, msg string
	}{
		{"dport = 443 and", "", "ends too early"},
		{"dprot = 443", "dprot", `did you mean "dport"`},
		{"color = red", "color", "unknown attribute"},
		{"dport = 70000", "70000", "port number"},
		{"dport = httpz", "httpz", "service name"},
		{"proto = 300", "300", "protocol number"},
		{"sip < 10.0.0.1", "<", "only with = or !="},
		{"sip = 10.0.0.300", "10.0.0.300", "IP address"},
		{"net 10.1.2.3/8", "10.1.2.3/8", "did you mean 10.0.0.0/8"},
		{"(dport = 443", "", "expected ')'"},
		{"dport = 443)", ")", "unbalanced"},
		{"dport = 443 sport = 1", "sport", "expected 'and', 'or'"},
		{"dport = 443 & tcp", "&", "must be doubled"},
		{"dport = 443 | tcp", "|", "must be doubled"},
		{"iface = 'eth0", "'eth0", "unterminated"},
		{"dport = ; tcp", ";", "unexpected character"},
		{"dport =", "", "expected a value"},
		{"and tcp", "and", "expected a comparison"},
		{"vlan 5000", "5000", "VLAN"},
		{strings.Repeat("(", 300) + "tcp" + strings.Repeat(")", 300), "(", "nested"},
	} {
		_, err := ParseCondition(c.in)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: %v, want a *SyntaxError", c.in, err)
			continue
		}
		tok := c.in[se.Pos:se.End]
		if tok != c.tok || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("%q: error %q at %q, want %q at %q", c.in, se.Msg, tok, c.msg, c.tok)
		}
		if lines := strings.Split(se.Caret(), "\n"); len(lines) != 2 || strings.Index(lines[1], "^") != 2+len([]rune(c.in[:se.Pos])) {
			t.Errorf("%q: caret misplaced:\n%s", c.in, se.Caret())
		}
	}
}

func TestParseGroupBy(t *testing.T) {
	for in, want := range map[string]string{
		"sip":                 "sip",
		"dip, sip":            "sip,dip",
		"talk_conv":           "sip,dip",
		"apps_port,time":      "time,dport,proto",
		"sip,dip,dport,proto": "sip,dip,dport,proto",
		"src,dst_port":        "sip,dport",
		"iface,sip,sip":       "iface,sip",
	} {
		g, err := ParseGroupBy(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		var names []string
		for _, a := range g {
			names = append(names, a.String())
		}
		if got := strings.Join(names, ","); got != want {
			t.Errorf("%q = %q, want %q", in, got, want)
		}
	}
	_, err := ParseGroupBy("sip,colour,dip")
	var se *SyntaxError
	if !errors.As(err, &se) || se.Input[se.Pos:se.End] != "colour" {
		t.Errorf("bad attribute: %v", err)
	}
	if _, err := ParseGroupBy("sip,,dip"); err == nil {
		t.Error("empty attribute accepted")
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"now":                         now,
		"-24h":                        now.Add(-24 * time.Hour),
		"-7d":                         now.Add(-7 * 24 * time.Hour),
		"1d12h":                       now.Add(-36 * time.Hour),
		"-90m":                        now.Add(-90 * time.Minute),
		"1767225600":                  time.Unix(1767225600, 0),
		"2026-01-02T03:04:05Z":        time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		"2026-01-02T03:04:05.5+01:00": time.Date(2026, 1, 2, 2, 4, 5, 5e8, time.UTC),
		"2026-01-02 03:04":            time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC),
		"2026-01-02":                  time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC),
	} {
		got, err := ParseTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, edge := range []string{"2262-04-11T23:47:16.854775807Z", "1677-09-21T00:12:43.145224192Z"} {
		if got, err := ParseTime(edge, now); err != nil || (!got.Equal(MinTime) && !got.Equal(MaxTime)) {
			t.Errorf("%q = %v, %v; want the edge of the range", edge, got, err)
		}
	}
	for _, bad := range []string{"", "yesterday", "-24x", "2026-13-01", "-5d-3h", "99999999999999",
		"2263-01-01", "1677-09-20", "2262-04-11T23:47:16.854775808Z", "1677-09-21T00:12:43.145224191Z", "9999-12-31T23:59:59Z", "0001-01-01"} {
		if _, err := ParseTime(bad, now); !errors.Is(err, ErrTime) {
			t.Errorf("%q: %v, want ErrTime", bad, err)
		}
	}
}

func TestParseSort(t *testing.T) {
	for in, want := range map[string][2]uint8{
		"bytes": {uint8(ByBytes), uint8(Sum)}, "packets:in": {uint8(ByPackets), uint8(In)},
		"flows": {uint8(ByFlows), uint8(Sum)}, "bytes:out": {uint8(ByBytes), uint8(Out)},
	} {
		m, d, err := ParseSort(in)
		if err != nil || uint8(m) != want[0] || uint8(d) != want[1] {
			t.Errorf("%q = %v %v %v", in, m, d, err)
		}
	}
	for _, bad := range []string{"size", "bytes:up"} {
		if _, _, err := ParseSort(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParseCondition: any input either parses to a condition whose
// canonical form parses back to itself, or fails with a *SyntaxError whose
// position lies inside the input; never a panic.
func FuzzParseCondition(f *testing.F) {
	for _, s := range []string{"dport = 443", "not (host 10.0.0.1 or net 2001:db8::/32) and tcp",
		"port != 22 && iface = 'eth 0'", "((((udp))))", "sip = ::ffff:10.0.0.1", "vlan >= 4095 or proto 0",
		"dport = ", "& |", "'", "snet 10.0.0.0/33", "\x00\xff", "not not not port < 1",
		"drop_reason = no_socket or sampling > 1", "not drop_reason != ''", "drop_reason 'and\\'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCondition(s)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("%q: %T %v", s, err, err)
			}
			if se.Pos < 0 || se.End < se.Pos || (len(s) <= maxInput && se.End > len(s)) {
				t.Fatalf("%q: position %d..%d outside the input", s, se.Pos, se.End)
			}
			_ = se.Caret()
			return
		}
		again, err := ParseCondition(c.String())
		if err != nil || again.String() != c.String() {
			t.Fatalf("%q: canonical %q does not parse back: %v", s, c.String(), err)
		}
	})
}
