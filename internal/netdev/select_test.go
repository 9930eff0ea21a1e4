package netdev

import (
	"strings"
	"testing"
)

func TestSelectorMatch(t *testing.T) {
	lo := Link{Index: 1, Name: "lo", Up: true, Running: true, Loopback: true, Type: 772}
	loDown := Link{Index: 1, Name: "lo", Loopback: true, Type: 772}
	eth0 := Link{Index: 2, Name: "eth0", Up: true, Running: true, Type: 1}
	eth1Down := Link{Index: 3, Name: "eth1", Type: 1}
	vethA := Link{Index: 4, Name: "veth12ab", Up: true, Type: 1, Kind: "veth"}
	myveth := Link{Index: 5, Name: "myveth0", Up: true, Running: true, Type: 1, Kind: "veth"}
	br := Link{Index: 6, Name: "br0", Up: true, Running: true, Type: 1, Kind: "bridge"}
	tun := Link{Index: 7, Name: "tun0", Up: true, Running: true, Type: 65534, Kind: "tun"}
	links := []Link{lo, loDown, eth0, eth1Down, vethA, myveth, br, tun}

	tests := []struct {
		specs []string
		want  []bool // one per link above
	}{
		//                                     lo     loDown eth0   eth1D  vethA  myveth br     tun
		{[]string{"eth0"}, []bool{false, false, true, false, false, false, false, false}},
		{[]string{"eth1"}, []bool{false, false, false, true, false, false, false, false}}, // named: matched although down
		{[]string{"lo"}, []bool{true, true, false, false, false, false, false, false}},    // loopback when named, up or not
		{[]string{"any"}, []bool{false, false, true, false, true, true, true, true}},      // up, not loopback
		{[]string{"any,lo"}, []bool{true, true, true, false, true, true, true, true}},
		{[]string{"any", "eth1"}, []bool{false, false, true, true, true, true, true, true}},
		{[]string{"eth0,eth1"}, []bool{false, false, true, true, false, false, false, false}},
		{[]string{"eth0", "eth0,eth0"}, []bool{false, false, true, false, false, false, false, false}},
		{[]string{"/veth/"}, []bool{false, false, false, false, true, true, false, false}},   // unanchored
		{[]string{"/^veth/"}, []bool{false, false, false, false, true, false, false, false}}, // anchored by the user
		{[]string{"/^veth[0-9]+$/"}, []bool{false, false, false, false, false, false, false, false}},
		{[]string{"/^(lo|eth[0-9])$/"}, []bool{true, true, true, true, false, false, false, false}}, // regex ignores state and loopback
		{[]string{"/a{1,2}/"}, []bool{false, false, false, false, true, false, false, false}},       // comma inside a regex is not a list separator
		{[]string{"tun0", "/^br/"}, []bool{false, false, false, false, false, false, true, true}},
		{[]string{"nosuch"}, []bool{false, false, false, false, false, false, false, false}},
		{[]string{"ETH0"}, []bool{false, false, false, false, false, false, false, false}}, // names are case-sensitive
	}
	for _, tt := range tests {
		s, err := ParseSelector(tt.specs)
		if err != nil {
			t.Errorf("ParseSelector(%q): %v", tt.specs, err)
			continue
		}
		for i, l := range links {
			if got := s.Match(l); got != tt.want[i] {
				t.Errorf("ParseSelector(%q).Match(%+v) = %v, want %v", tt.specs, l, got, tt.want[i])
			}
		}
	}
}

func TestSelectorString(t *testing.T) {
	tests := []struct {
		specs []string
		want  string
		any   bool
		names []string
	}{
		{[]string{"eth0"}, "eth0", false, []string{"eth0"}},
		{[]string{"eth1,eth0", "eth1", "any"}, "any eth1,eth0", true, []string{"eth1", "eth0"}},
		{[]string{"/^veth/", "lo", "/x,y/"}, "lo /^veth/ /x,y/", false, []string{"lo"}},
	}
	for _, tt := range tests {
		s, err := ParseSelector(tt.specs)
		if err != nil {
			t.Fatalf("ParseSelector(%q): %v", tt.specs, err)
		}
		if got := s.String(); got != tt.want {
			t.Errorf("ParseSelector(%q).String() = %q, want %q", tt.specs, got, tt.want)
		}
		if s.Any() != tt.any || strings.Join(s.Names(), " ") != strings.Join(tt.names, " ") {
			t.Errorf("ParseSelector(%q): Any %v Names %q, want %v %q", tt.specs, s.Any(), s.Names(), tt.any, tt.names)
		}
	}
}

func TestSelectorErrors(t *testing.T) {
	tests := []struct {
		specs []string
		want  []string // substrings of the error
	}{
		{nil, []string{"no interface given"}},
		{[]string{}, []string{"no interface given"}},
		{[]string{""}, []string{"spec 1", "empty"}},
		{[]string{"eth0", "  "}, []string{"spec 2", "empty"}},
		{[]string{"eth0,,eth1"}, []string{"spec 1", "element 2", "empty name"}},
		{[]string{"eth0,"}, []string{"element 2", "empty name"}},
		{[]string{"abcdefghijklmnop"}, []string{"16 bytes", "15"}},
		{[]string{"eth0", "/veth[/"}, []string{"spec 2", `"/veth[/"`, "bad regex /veth[/", "missing closing ]"}},
		{[]string{"/(a/"}, []string{"bad regex /(a/", "missing closing )"}},
		{[]string{"//"}, []string{"empty regex"}},
		{[]string{"/"}, []string{"missing closing '/'"}},
		{[]string{"/veth"}, []string{"missing closing '/'"}},
		{[]string{"eth0,/veth/"}, []string{"element 2", "spec of its own"}},
		{[]string{"eth 0"}, []string{"white space"}},
		{[]string{"eth0:1"}, []string{"':'"}},
		{[]string{"a/b"}, []string{"'/'"}},
		{[]string{".."}, []string{"not a valid interface name"}},
		{[]string{strings.Repeat("x", 5000)}, []string{"longer than 4096 bytes", "..."}},
	}
	for _, tt := range tests {
		s, err := ParseSelector(tt.specs)
		if err == nil {
			t.Errorf("ParseSelector(%q) = %v, want an error", tt.specs, s)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("ParseSelector(%q) error %q does not contain %q", tt.specs, err, w)
			}
		}
	}
	// Accepted edge cases.
	for _, ok := range [][]string{{"abcdefghijklmno"}, {"lo"}, {"any,any"}, {"eth0.100"}, {"/a/b/"}} {
		if _, err := ParseSelector(ok); err != nil {
			t.Errorf("ParseSelector(%q): %v, want success", ok, err)
		}
	}
}

func TestSelectorMatchAllocs(t *testing.T) {
	s, err := ParseSelector([]string{"any", "eth0,lo", "/^veth/"})
	if err != nil {
		t.Fatal(err)
	}
	l := Link{Index: 4, Name: "veth12ab", Type: 1}
	if n := testing.AllocsPerRun(100, func() { _ = s.Match(l) }); n != 0 {
		t.Errorf("Match allocates %v times per call, want 0", n)
	}
}

func BenchmarkSelectorMatch(b *testing.B) {
	s, err := ParseSelector([]string{"eth0,eth1", "/^veth/"})
	if err != nil {
		b.Fatal(err)
	}
	l := Link{Index: 4, Name: "veth12ab", Type: 1}
	b.ReportAllocs()
	for b.Loop() {
		if !s.Match(l) {
			b.Fatal("no match")
		}
	}
}
