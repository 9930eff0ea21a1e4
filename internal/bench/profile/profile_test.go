package profile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func vars(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// Every example profile loads; the uperf ones with Ripsaw's variables.
func TestExamples(t *testing.T) {
	files, _ := filepath.Glob("../../../examples/bench/*")
	if len(files) < 8 {
		t.Fatalf("%d example profiles", len(files))
	}
	v := vars(map[string]string{"nthr": "2", "proto": "tcp", "wsize": "64", "rsize": "1024", "runtime": "30"})
	for _, f := range files {
		p, err := Load(f, v)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if p.Name == "" || p.Threads() < 1 {
			t.Errorf("%s: %+v", f, p)
		}
	}
	p, _ := Load("../../../examples/bench/multus.yaml", nil)
	if p == nil || !p.UsesSecondary() || p.Groups[1].Txns[0].Ops[0].WndSz != 4<<20 || !p.Groups[1].Txns[0].Ops[0].IPv6 {
		t.Errorf("multus: %+v", p)
	}
}

// The Ripsaw-rendered stream profile (not valid XML: version=1.0 and
// type=write unquoted) reads into exactly the model.
func TestUperfXMLAsRipsawWritesIt(t *testing.T) {
	data, err := os.ReadFile("../../../examples/bench/stream-4x16k.xml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseUperfXML(data, "stream-4x16k.xml", nil) // $h is in remotehost=: ignored
	if err != nil {
		t.Fatal(err)
	}
	g := p.Groups[0]
	if p.Name != "stream-tcp-16384-4" || len(p.Groups) != 1 || g.Threads != 4 || len(g.Txns) != 3 {
		t.Fatalf("%+v", p)
	}
	want := []Txn{
		{Iterations: 1, Ops: []Op{{Kind: Connect, Proto: TCP, Count: 1}}},
		{Duration: 10 * time.Second, Ops: []Op{{Kind: Write, Size: 16384, Count: 16}}},
		{Iterations: 1, Ops: []Op{{Kind: Disconnect, Count: 1}}},
	}
	for i, w := range want {
		got := g.Txns[i]
		if got.Iterations != w.Iterations || got.Duration != w.Duration || len(got.Ops) != 1 || got.Ops[0] != w.Ops[0] {
			t.Errorf("transaction %d: %+v, want %+v", i, got, w)
		}
	}
	if !g.Txns[1].ClientFirst() {
		t.Error("a write is client first")
	}
}

func TestUperfXMLVars(t *testing.T) {
	data, _ := os.ReadFile("../../../examples/bench/rr.xml")
	_, err := ParseUperfXML(data, "rr.xml", vars(map[string]string{"nthr": "2"}))
	if !errors.Is(err, errNoVar) || !strings.Contains(err.Error(), "$proto") {
		t.Errorf("missing $proto: %v", err)
	}
	p, err := ParseUperfXML(data, "rr.xml", vars(map[string]string{"nthr": "3", "proto": "udp", "wsize": "1k", "rsize": "2k", "runtime": "1500ms"}))
	if err != nil {
		t.Fatal(err)
	}
	g := p.Groups[0]
	if p.Name != "rr-udp-1k-2k-3" || g.Threads != 3 || g.Txns[1].Duration != 1500*time.Millisecond ||
		g.Txns[0].Ops[0].Proto != UDP || !g.Txns[0].Ops[0].NoDelay || g.Txns[1].Ops[0].Size != 1024 || g.Txns[1].Ops[1].Size != 2048 {
		t.Errorf("%+v", p)
	}
}

func TestUperfXMLErrors(t *testing.T) {
	wrap := func(body string) string {
		return `<profile name="x"><group nthreads="1">` + body + `</group></profile>`
	}
	conn := `<transaction iterations="1"><flowop type="connect" options="protocol=tcp"/></transaction>`
	for _, c := range []struct{ xml, want string }{
		{wrap(`<transaction iterations="1"><flowop type="accept"/></transaction>`), "server's side"},
		{wrap(`<transaction iterations="1"><flowop type="redo"/></transaction>`), "not supported"},
		{wrap(conn + `<transaction iterations="1" rate="10"><flowop type="write" options="size=1"/></transaction>`), "rate="},
		{wrap(conn + `<transaction iterations="1"><flowop type="write" options="size=1 bogus=2"/></transaction>`), `"bogus"`},
		{wrap(conn + `<transaction iterations="1"><flowop type="write" options="count=2"/></transaction>`), "size= is required"},
		{wrap(conn + `<transaction><flowop type="write" options="size=1"/></transaction>`), "exactly one"},
		{`<profile name="x"></profile>`, "no <group>"},
		{`<profile`, "unexpected EOF"},
		{`<?xml version="1.0" encoding="UTF-16"?><profile/>`, "UTF-8"},
	} {
		_, err := ParseUperfXML([]byte(c.xml), "t.xml", nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.xml, err, c.want)
		}
	}
	// Ignored options, nop and nprocs.
	p, err := ParseUperfXML([]byte(`<profile name="x"><group nprocs="2"><transaction iterations="1">
		<flowop type="connect" options="remotehost=$h port=1 engine=x protocol=tcp"/><flowop type="nop"/>
		<flowop type="write" options="size=10 canfail non_blocking"/><flowop type="think" options="duration=1ms idle"/><flowop type="disconnect"/>
		</transaction></group></profile>`), "t.xml", nil)
	if err != nil || p.Groups[0].Threads != 2 || len(p.Groups[0].Txns[0].Ops) != 4 || !p.Groups[0].Txns[0].Ops[2].Idle {
		t.Errorf("ignored options: %v %+v", err, p)
	}
}

func TestYAMLErrors(t *testing.T) {
	head := "name: x\ngroups:\n  - nthreads: 1\n    transactions:\n"
	conn := "      - iterations: 1\n        flowops:\n          - {op: connect}\n"
	for _, c := range []struct{ yaml, want string }{
		{"name: x\ncolour: red\n", "t.yaml:2: profile: unknown key \"colour\""},
		{"name: x\n", "profile: no groups"},
		{head + conn + "      - iterations: 1\n        flowops:\n          - {op: write, size: 1, colour: 2}\n", `t.yaml:10: write: unknown key "colour"`},
		{head + conn + "      - iterations: 1\n        flowops:\n          - {op: jump}\n", `t.yaml:10: flowop: op "jump"`},
		{head + conn + "      - iterations: 1\n        flowops:\n          - {op: write}\n", "t.yaml:10: write: size is required"},
		{head + conn + "      - iterations: 1\n        flowops:\n          - {op: write, size: 12q}\n", "t.yaml:10: size: size \"12q\""},
		{head + conn + "      - iterations: 1\n        duration: 1s\n        flowops:\n          - {op: write, size: 1}\n", "t.yaml:8: transaction: give exactly one"},
		{head + "      - iterations: 1\n        flowops:\n          - {op: connect, protocol: sctp}\n", "protocol \"sctp\""},
		{"a: &x 1\nname: *x\n", "profile: unknown key \"a\""},
		{"name: &n x\ngroups: *n\n", "aliases"},
		{"name: [1\n", "yaml"},
		{"", "empty profile"},
		{"name: x\nname: y\ngroups: []\n", `"name" given twice`},
	} {
		_, err := ParseYAML([]byte(c.yaml), "t.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
	if _, err := ParseYAML(make([]byte, MaxFileSize+1), "big.yaml"); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("size bound: %v", err)
	}
}

// One case per validation rule.
func TestValidate(t *testing.T) {
	c := func(p Proto) Op { return Op{Kind: Connect, Proto: p} }
	w := func(size int) Op { return Op{Kind: Write, Size: size, Count: 1} }
	r := func(size int) Op { return Op{Kind: Read, Size: size, Count: 1} }
	d := Op{Kind: Disconnect}
	one := func(ops ...Op) Txn { return Txn{Iterations: 1, Ops: ops} }
	prof := func(txns ...Txn) *Profile { return &Profile{Groups: []Group{{Threads: 1, Txns: txns}}} }
	for _, tc := range []struct {
		name string
		p    *Profile
		want string
	}{
		{"no groups", &Profile{}, "0 groups"},
		{"threads", &Profile{Groups: []Group{{Threads: 0, Txns: []Txn{one(c(TCP))}}}}, "nthreads 0"},
		{"too many threads", &Profile{Groups: []Group{{Threads: 1000, Txns: []Txn{one(c(TCP))}}, {Threads: 100, Txns: []Txn{one(c(TCP))}}}}, "1100 threads"},
		{"no txns", &Profile{Groups: []Group{{Threads: 1}}}, "0 transactions"},
		{"both", prof(Txn{Iterations: 1, Duration: time.Second, Ops: []Op{c(TCP)}}), "exactly one"},
		{"neither", prof(Txn{Ops: []Op{c(TCP)}}), "exactly one"},
		{"long", prof(Txn{Duration: 2 * time.Hour, Ops: []Op{c(TCP), d}}), "at most 1h0m0s"},
		{"iterations", prof(Txn{Iterations: MaxIterations + 1, Ops: []Op{c(TCP), d}}), "iterations"},
		{"no ops", prof(Txn{Iterations: 1}), "0 flowops"},
		{"not connected", prof(one(w(10))), "not connected"},
		{"twice", prof(one(c(TCP), c(TCP))), "already connected"},
		{"disconnect", prof(one(d)), "not connected"},
		{"sendto tcp", prof(one(c(TCP), Op{Kind: SendTo, Size: 1, Count: 1})), "need a UDP"},
		{"udp first read", prof(one(c(UDP), r(10))), "begin with a client send"},
		{"udp first read later txn", prof(one(c(UDP)), one(r(10))), "begin with a client send"},
		{"size", prof(one(c(TCP), w(0))), "size 0"},
		{"tcp size", prof(one(c(TCP), w(MaxSize+1))), "size 16777217"},
		{"udp size", prof(one(c(UDP), w(MaxUDPSize+1))), "size 65508"},
		{"count", prof(one(c(TCP), Op{Kind: Write, Size: 1, Count: MaxCount + 1})), "count"},
		{"timeout", prof(one(c(UDP), w(1), Op{Kind: Read, Size: 1, Count: 1, Timeout: time.Minute})), "timeout"},
		{"think", prof(one(Op{Kind: Think})), "duration 0s"},
		{"wndsz", prof(one(Op{Kind: Connect, Proto: TCP, WndSz: 1 << 30})), "wndsz"},
		{"repeat leaves open", prof(Txn{Iterations: 2, Ops: []Op{c(TCP)}}), "as it found it"},
		{"duration closes", prof(one(c(TCP)), Txn{Duration: time.Second, Ops: []Op{w(1), d}}), "as it found it"},
		{"think loop", prof(Txn{Duration: time.Second, Ops: []Op{{Kind: Think, Duration: time.Millisecond}}}), "think ops only"},
		{"unknown", prof(one(Op{Kind: 99})), "unknown flowop"},
	} {
		err := tc.p.Validate()
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	ok := prof(one(c(UDP)), Txn{Duration: time.Second, Ops: []Op{{Kind: SendTo, Size: 10}, {Kind: RecvFrom, Size: 10}}}, one(d),
		Txn{Duration: time.Second, Ops: []Op{c(TCP), w(5), r(5), d}})
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if ok.Groups[0].Txns[1].Ops[0].Count != 1 {
		t.Error("count not defaulted")
	}
}

func TestValues(t *testing.T) {
	for s, want := range map[string]int{"16k": 16384, "64KB": 65536, "1KiB": 1024, "2m": 2 << 20, "1g": 1 << 30, " 7 ": 7} {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "k", "-1", "1.5k", "99999999999999g"} {
		if _, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) accepted", s)
		}
	}
	for s, want := range map[string]time.Duration{"30": 30 * time.Second, "10us": 10 * time.Microsecond, "1m30s": 90 * time.Second, "0.5": 500 * time.Millisecond} {
		if got, err := ParseDuration(s); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "soon", "-3", "1e9"} {
		if _, err := ParseDuration(s); err == nil {
			t.Errorf("ParseDuration(%q) accepted", s)
		}
	}
	if got, err := expand("a$x-$y_1$", vars(map[string]string{"x": "1", "y_1": "2"})); err != nil || got != "a1-2$" {
		t.Errorf("expand: %q %v", got, err)
	}
}
