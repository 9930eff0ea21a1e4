package runner

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/bench/profile"
	"github.com/weir-dev/weir/internal/bench/result"
	"github.com/weir-dev/weir/internal/testhost"
)

// childArg makes the test binary a bench child (see TestMain).
const childArg = "weir-bench-child"

// TestMain: with childArg the test binary is the server or client child.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == childArg {
		var err error
		if os.Args[2] == "server" {
			err = Serve(os.Stdin, os.Stdout)
		} else {
			err = Client(os.Stdin, os.Stdout)
		}
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func testConfig(t *testing.T, p *profile.Profile, pairs int) Config {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Profile: p, Pairs: pairs, Version: "test",
		Child: func(role string) (string, []string) { return exe, []string{childArg, role} },
		Log:   testWriter{t},
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// Request-response over both networks and both address families, two
// pairs, offloads off: every packet the driver's TCP_INFO and datagram
// counts expect is exactly what the server's interfaces counted, and the
// tables are filled.
func TestRunExact(t *testing.T) {
	testhost.Skip(t)
	testhost.Need(t, "ethtool", "ethtool")
	op := func(k profile.OpKind, size int) profile.Op { return profile.Op{Kind: k, Size: size, Count: 1} }
	p := &profile.Profile{Name: "mixed", Groups: []profile.Group{
		{Name: "rr", Threads: 2, Txns: []profile.Txn{
			{Iterations: 1, Ops: []profile.Op{{Kind: profile.Connect, Proto: profile.TCP, NoDelay: true}}},
			{Duration: 300 * time.Millisecond, Ops: []profile.Op{op(profile.Write, 200), op(profile.Read, 3000)}},
			{Iterations: 1, Ops: []profile.Op{{Kind: profile.Disconnect}}},
		}},
		{Name: "multus6", Threads: 1, Txns: []profile.Txn{
			{Iterations: 1, Ops: []profile.Op{{Kind: profile.Connect, Proto: profile.TCP, IPv6: true, Net: profile.Secondary}}},
			{Duration: 300 * time.Millisecond, Ops: []profile.Op{{Kind: profile.Write, Size: 65536, Count: 4}}},
			{Iterations: 1, Ops: []profile.Op{{Kind: profile.Disconnect}}},
		}},
		{Name: "udp", Threads: 1, Txns: []profile.Txn{
			{Iterations: 1, Ops: []profile.Op{{Kind: profile.Connect, Proto: profile.UDP}}},
			{Iterations: 200, Ops: []profile.Op{op(profile.SendTo, 100), op(profile.RecvFrom, 700)}},
			{Iterations: 1, Ops: []profile.Op{{Kind: profile.Disconnect}}},
		}},
	}}
	cfg := testConfig(t, p, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Errors) > 0 {
		t.Fatalf("errors: %v", run.Errors)
	}
	if !run.Options.Secondary || run.Options.Offloads {
		t.Errorf("options %+v", run.Options)
	}
	if len(run.Conns) != 2*(2+1+1) {
		t.Fatalf("%d connections", len(run.Conns))
	}
	// Packets always add up. Bytes do when no segment was retransmitted
	// (SACK blocks then lengthen some headers): two streams on two cores
	// may overflow a veth's backlog, and a tail loss probe may resend an
	// answer, so a connection may be inexact, but only with retransmissions.
	var pkts, ipBytes uint64
	allExact := true
	for _, c := range run.Conns {
		if !c.Exact && c.Retransmits == 0 {
			t.Errorf("not exact: %+v", c)
		}
		allExact = allExact && c.Exact
		pkts += c.FwdPkts + c.RevPkts
		ipBytes += c.FwdIPBytes + c.RevIPBytes
	}
	var nicPkts, nicBytes uint64
	for _, n := range run.NICs {
		if n.Host == "server" {
			nicPkts += n.RxPackets + n.TxPackets
			nicBytes += n.RxBytes + n.TxBytes - 14*(n.RxPackets+n.TxPackets)
		}
	}
	if nicPkts != pkts || allExact && nicBytes != ipBytes || nicBytes < ipBytes {
		t.Errorf("server interfaces counted %d packets, %d IP bytes; the connections expect %d, %d", nicPkts, nicBytes, pkts, ipBytes)
	}
	if len(run.NICs) != 6 || len(run.Txns) != 9 || len(run.CPU) != 2 || run.CPU[0].User+run.CPU[0].System == 0 {
		t.Errorf("%d NICs, %d txns, cpu %+v", len(run.NICs), len(run.Txns), run.CPU)
	}
	for _, tx := range run.Txns {
		if tx.Latency.Count == 0 || tx.Latency.Min > tx.Latency.P50 || tx.Latency.P50 > tx.Latency.Max {
			t.Errorf("txn %+v", tx)
		}
	}
	var buf strings.Builder
	if err := run.Write(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := result.Read(strings.NewReader(buf.String()))
	if err != nil || len(back.Conns) != len(run.Conns) || back.Profile.Groups[1].Txns[0].Ops[0].Net != profile.Secondary {
		t.Fatalf("round trip: %v", err)
	}
}
