//go:build linux

package afpacket

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
	"github.com/weir-dev/weir/internal/testhost"
)

// udpDstPort is a hand-assembled filter: IPv4 (no options) UDP to port.
func udpDstPort(port uint16) []Instruction {
	return []Instruction{
		{Op: 0x28, K: 12},                         // ldh [12]      ethertype
		{Op: 0x15, Jt: 0, Jf: 5, K: 0x0800},       // jeq IPv4
		{Op: 0x30, K: 23},                         // ldb [23]      protocol
		{Op: 0x15, Jt: 0, Jf: 3, K: 17},           // jeq UDP
		{Op: 0x28, K: 36},                         // ldh [36]      destination port (IHL 5)
		{Op: 0x15, Jt: 0, Jf: 1, K: uint32(port)}, // jeq port
		{Op: 0x06, K: 1 << 18},                    // ret accept
		{Op: 0x06, K: 0},                          // ret drop
	}
}

// TestSetReadsEveryMember: two rings on one interface (no fanout) each
// see every datagram; a Set reads both to the end, and a filter attached
// before bind lets through exactly the datagrams it names.
func TestSetReadsEveryMember(t *testing.T) {
	pr := testhost.NewPair(t)
	const n, size, port, other = 300, 100, 42001, 42002
	set, err := NewSet()
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	plain := openIn(t, pr.B, testCfg(pr.B.Iface))
	fcfg := testCfg(pr.B.Iface)
	fcfg.Filter = udpDstPort(port)
	filtered := openIn(t, pr.B, fcfg)
	for _, m := range []*Source{plain, filtered} {
		if err := set.Add(m); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, p := range []int{port, other} {
		if sent, recv, err := testhost.SendUDP(ctx, pr.A, pr.B, false, p, n, size); err != nil || sent != n || recv != n {
			t.Fatalf("SendUDP: sent %d received %d: %v", sent, recv, err)
		}
	}
	m := matcher{src: pr.A.Addr4, dst: pr.B.Addr4, ports: map[uint16]bool{port: true, other: true}}
	tl := map[*Source]*tally{plain: newTally(), filtered: newTally()}
	d := packet.NewDecoder(packet.Config{})
	var f source.Frame
	var p flow.Packet
	for range maxDrain {
		src, err := set.Next(&f, idle)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatalf("Set.Next: %v", err)
		}
		t := tl[src]
		if d.Decode(f.Link, f.Data, f.WireLen, &p) && m.is(&p) {
			t.match++
			t.perPort[p.Key.DstPort]++
		} else {
			t.other++
		}
	}
	if a, b := tl[plain].perPort[port], tl[plain].perPort[other]; a != n || b != n {
		t.Errorf("unfiltered member: %d and %d datagrams, want %d each", a, b, n)
	}
	if a, b, o := tl[filtered].perPort[port], tl[filtered].perPort[other], tl[filtered].other; a != n || b != 0 || o != 0 {
		t.Errorf("filtered member: %d to %d, %d to %d, %d other; want %d, 0, 0", a, port, b, other, o, n)
	}

	// Wake interrupts a wait; Remove closes the member.
	go func() { time.Sleep(20 * time.Millisecond); set.Wake() }()
	if _, err := set.Next(&f, 5*time.Second); !errors.Is(err, ErrWoken) {
		t.Fatalf("Next after Wake: %v, want ErrWoken", err)
	}
	if err := set.Remove(plain); err != nil {
		t.Fatal(err)
	}
	if len(set.Sources()) != 1 {
		t.Fatalf("%d members after Remove, want 1", len(set.Sources()))
	}
	if _, err := set.Next(&f, 10*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Next on a quiet set: %v, want deadline exceeded", err)
	}
}

// TestSetRingError: deleting a member's interface surfaces as a
// *RingError naming that member.
func TestSetRingError(t *testing.T) {
	pr := testhost.NewPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := pr.B.Exec(ctx, "ip", "link", "add", "wtveth0", "type", "veth", "peer", "name", "wtveth1"); err != nil {
		t.Fatalf("ip link add: %v: %s", err, out)
	}
	if out, err := pr.B.Exec(ctx, "ip", "link", "set", "wtveth0", "up"); err != nil {
		t.Fatalf("ip link set up: %v: %s", err, out)
	}
	set, err := NewSet()
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	var s *Source
	if err := pr.B.Do(func() (err error) { s, err = Open(testCfg("wtveth0")); return err }); err != nil {
		t.Fatal(err)
	}
	if err := set.Add(s); err != nil {
		t.Fatal(err)
	}
	if out, err := pr.B.Exec(ctx, "ip", "link", "del", "wtveth0"); err != nil {
		t.Fatalf("ip link del: %v: %s", err, out)
	}
	var f source.Frame
	_, err = set.Next(&f, 3*time.Second)
	var re *RingError
	if !errors.As(err, &re) || re.Source != s {
		t.Fatalf("Next after the interface went away: %v, want a RingError for its member", err)
	}
	if err := set.Remove(s); err != nil {
		t.Logf("Remove: %v", err)
	}
}
