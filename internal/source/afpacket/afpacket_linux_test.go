//go:build linux

package afpacket

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
	"github.com/weir-dev/weir/internal/testhost"
)

const (
	idle     = 300 * time.Millisecond // no frame for this long after the traffic: the ring is drained (6 retire timeouts)
	maxDrain = 200000                 // bound on frames read by one drain
)

// testCfg is a small ring (8 × 256 KiB) so that many sources fit in memory.
func testCfg(iface string) RingConfig {
	return RingConfig{Iface: iface, BlockSize: 256 << 10, NumBlocks: 8}
}

// openIn opens a source on h's interface (or on name, if set) inside h's
// namespace and closes it at the end of the test.
func openIn(t *testing.T, h *testhost.Host, cfg RingConfig) *Source {
	t.Helper()
	var s *Source
	if err := h.Do(func() (err error) { s, err = Open(cfg); return err }); err != nil {
		t.Fatalf("Open(%+v) in %s: %v", cfg, h.Name, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// tally is what a drain saw: frames matching one UDP flow pattern, their
// summed IP lengths, and everything else.
type tally struct {
	match, other int
	bytes        uint64
	perPort      map[uint16]int
}

// matcher tells which decoded packets belong to the test traffic.
type matcher struct {
	src, dst netip.Addr
	ports    map[uint16]bool // destination ports of the test flows
}

func (m matcher) is(p *flow.Packet) bool {
	k := &p.Key
	return k.Proto == flow.ProtoUDP && k.Src() == m.src && k.Dst() == m.dst && m.ports[k.DstPort]
}

// step reads one frame (waiting at most wait) and adds it to tl.
func step(s *Source, d *packet.Decoder, m matcher, f *source.Frame, p *flow.Packet, tl *tally, wait time.Duration) error {
	if err := s.NextTimeout(f, wait); err != nil {
		return err
	}
	if d.Decode(f.Link, f.Data, f.WireLen, p) && m.is(p) {
		tl.match++
		tl.bytes += uint64(p.Length)
		tl.perPort[p.Key.DstPort]++
	} else {
		tl.other++
	}
	return nil
}

// drain reads frames until none arrives for idle.
func drain(t *testing.T, s *Source, m matcher, tl *tally) {
	t.Helper()
	d := packet.NewDecoder(packet.Config{})
	var f source.Frame
	var p flow.Packet
	for range maxDrain {
		err := step(s, d, m, &f, &p, tl, idle)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return
		}
		if err != nil {
			t.Fatalf("NextTimeout: %v", err)
		}
		if f.Iface != s.iface || f.Link != packet.LinkEthernet {
			t.Fatalf("frame Iface %q Link %v, want %q ethernet", f.Iface, f.Link, s.iface)
		}
	}
	t.Fatalf("more than %d frames", maxDrain)
}

// drainAll drains each source in turn (each until idle) until their
// matching frames add up to want or 20 s pass. The traffic has been
// received when a test drains, so its frames are in the kernel: under load
// a ring block can retire later than idle after the traffic, and waiting
// for the count is not a guess. Extra frames still show: every round
// drains each source until idle.
func drainAll(t *testing.T, m matcher, want int, ss []*Source, ts []*tally) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		sum := 0
		for i := range ss {
			drain(t, ss[i], m, ts[i])
			sum += ts[i].match
		}
		if sum >= want || time.Now().After(deadline) {
			return
		}
	}
}

func newTally() *tally { return &tally{perPort: map[uint16]int{}} }

func TestUDPExactCounts(t *testing.T) {
	pr := testhost.NewPair(t)
	const n, size, port = 1000, 200, 40001
	for _, v6 := range []bool{false, true} {
		name, ipHdr := "ipv4", 20
		if v6 {
			name, ipHdr = "ipv6", 40
		}
		t.Run(name, func(t *testing.T) {
			s := openIn(t, pr.B, testCfg(pr.B.Iface))
			if s.Link() != packet.LinkEthernet {
				t.Fatalf("veth link type %v, want ethernet", s.Link())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			sent, recv, err := testhost.SendUDP(ctx, pr.A, pr.B, v6, port, n, size)
			if err != nil || sent != n || recv != n {
				t.Fatalf("SendUDP: sent %d received %d: %v", sent, recv, err)
			}
			m := matcher{src: pr.A.Addr(v6), dst: pr.B.Addr(v6), ports: map[uint16]bool{port: true}}
			tl := newTally()
			d := packet.NewDecoder(packet.Config{})
			var f source.Frame
			var p flow.Packet
			if !v6 { // zero allocations per frame, measured on frames already in the ring
				time.Sleep(3 * DefaultTimeout) // let the last block retire
				const runs = 200
				allocs := testing.AllocsPerRun(runs, func() {
					if err := step(s, d, m, &f, &p, tl, time.Second); err != nil {
						t.Errorf("NextTimeout: %v", err)
					}
				})
				if allocs != 0 {
					t.Errorf("%v allocations per Next+Decode, want 0", allocs)
				}
				if got := tl.match + tl.other; got != runs+1 {
					t.Fatalf("read %d frames during AllocsPerRun, want %d", got, runs+1)
				}
			}
			drainAll(t, m, n, []*Source{s}, []*tally{tl})
			t.Logf("%s: %d matching frames, %d other", name, tl.match, tl.other)
			if tl.match != n {
				t.Errorf("matching frames %d, want %d", tl.match, n)
			}
			if want := uint64(n * (ipHdr + 8 + size)); tl.bytes != want {
				t.Errorf("summed IP length %d, want %d", tl.bytes, want)
			}
			st, err := s.Stats()
			if err != nil {
				t.Fatal(err)
			}
			total := uint64(tl.match + tl.other)
			if st.Packets < total || st.Drops != 0 || st.Corrupt != 0 {
				t.Errorf("Stats %+v: want Packets >= %d frames read, Drops 0, Corrupt 0", st, total)
			}
			st2, err := s.Stats() // the kernel reset its counters on the first read: totals must not go down
			if err != nil || st2.Packets < st.Packets {
				t.Errorf("second Stats %+v (%v) below first %+v", st2, err, st)
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if st3, err := s.Stats(); err != nil || st3.Packets < st2.Packets {
				t.Errorf("Stats after Close %+v (%v), want Packets >= %d", st3, err, st2.Packets)
			}
		})
	}
}

func TestFanoutSplitsFlows(t *testing.T) {
	pr := testhost.NewPair(t)
	const flows, per, size, base = 20, 50, 100, 41000
	cfg := testCfg(pr.B.Iface)
	cfg.Fanout = &Fanout{Group: uint16(os.Getpid()), Mode: FanoutHash}
	s1 := openIn(t, pr.B, cfg)
	s2 := openIn(t, pr.B, cfg)
	m := matcher{src: pr.A.Addr4, dst: pr.B.Addr4, ports: map[uint16]bool{}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range flows {
		port := base + i
		m.ports[uint16(port)] = true
		sent, recv, err := testhost.SendUDP(ctx, pr.A, pr.B, false, port, per, size)
		if err != nil || sent != per || recv != per {
			t.Fatalf("SendUDP port %d: sent %d received %d: %v", port, sent, recv, err)
		}
	}
	t1, t2 := newTally(), newTally()
	drainAll(t, m, flows*per, []*Source{s1, s2}, []*tally{t1, t2})
	t.Logf("fanout: %d + %d matching frames", t1.match, t2.match)
	if t1.match+t2.match != flows*per {
		t.Errorf("fanout members saw %d + %d datagrams, want %d in all", t1.match, t2.match, flows*per)
	}
	if t1.match == 0 || t2.match == 0 {
		t.Errorf("one fanout member saw nothing (%d, %d) across %d flows", t1.match, t2.match, flows)
	}
	for i := range flows { // hash mode: every flow goes entirely to one member
		port := uint16(base + i)
		a, b := t1.perPort[port], t2.perPort[port]
		if !(a == per && b == 0 || a == 0 && b == per) {
			t.Errorf("flow to port %d split %d/%d, want all %d on one member", port, a, b, per)
		}
	}
}

// TestLoopback checks that loopback traffic is Ethernet framed and seen
// once per packet (not once sent and once received).
func TestLoopback(t *testing.T) {
	pr := testhost.NewPair(t)
	s := openIn(t, pr.A, testCfg("lo"))
	const n, size, port = 50, 64, 40100
	lo := netip.MustParseAddr("127.0.0.1")
	err := pr.A.Do(func() error {
		rc, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo, port)))
		if err != nil {
			return err
		}
		defer rc.Close()
		sc, err := net.DialUDP("udp4", nil, rc.LocalAddr().(*net.UDPAddr))
		if err != nil {
			return err
		}
		defer sc.Close()
		for range n {
			if _, err := sc.Write(make([]byte, size)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	m := matcher{src: lo, dst: lo, ports: map[uint16]bool{port: true}}
	tl := newTally()
	drainAll(t, m, n, []*Source{s}, []*tally{tl})
	if tl.match != n || tl.bytes != uint64(n*(20+8+size)) {
		t.Errorf("loopback: %d frames, %d bytes; want %d frames, %d bytes", tl.match, tl.bytes, n, n*(20+8+size))
	}
}

func TestCloseUnblocksNext(t *testing.T) {
	pr := testhost.NewPair(t)
	s := openIn(t, pr.A, testCfg("lo")) // a quiet interface: Next waits
	done := make(chan error, 1)
	var returned time.Time // written before the send on done
	go func() {
		var f source.Frame
		for range 10000 { // bounded; loopback is quiet in a fresh namespace
			if err := s.Next(&f); err != nil {
				returned = time.Now()
				done <- err
				return
			}
		}
		done <- errors.New("Next never blocked")
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Next returned before Close: %v", err)
	default:
	}
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, source.ErrStopped) {
			t.Fatalf("Next after Close: %v, want source.ErrStopped", err)
		}
		t.Logf("Next returned %v after Close began; Close took %v", returned.Sub(start), closed.Sub(start))
	case <-time.After(2 * time.Second):
		t.Fatal("Next still blocked 2s after Close")
	}
	var f source.Frame
	if err := s.Next(&f); !errors.Is(err, source.ErrStopped) {
		t.Errorf("Next on closed source: %v, want ErrStopped", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	_, err := Open(RingConfig{Iface: "weirnosuch0"})
	if err == nil || !strings.Contains(err.Error(), `"weirnosuch0"`) {
		t.Fatalf("Open on a missing interface: %v, want an error naming it", err)
	}
	if os.Geteuid() != 0 {
		_, err := Open(RingConfig{Iface: "lo"})
		if err == nil || !strings.Contains(err.Error(), "CAP_NET_RAW") {
			t.Fatalf("unprivileged Open: %v, want a CAP_NET_RAW hint", err)
		}
	}
}

func BenchmarkNext(b *testing.B) {
	pr := testhost.NewPair(b)
	cfg := testCfg(pr.B.Iface)
	cfg.NumBlocks = 64
	var s *Source
	if err := pr.B.Do(func() (err error) { s, err = Open(cfg); return err }); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 60000
	if _, recv, err := testhost.SendUDP(context.Background(), pr.A, pr.B, false, 40200, n, 64); err != nil || recv != n {
		b.Fatalf("SendUDP: %d received: %v", recv, err)
	}
	time.Sleep(3 * DefaultTimeout)
	var f source.Frame
	b.ReportAllocs()
	b.ResetTimer()
	read := 0
	for range b.N {
		if read == n { // ring drained: stop measuring (frames on a quiet link would only time the poll)
			break
		}
		if err := s.NextTimeout(&f, 0); err != nil {
			b.Fatalf("after %d frames: %v", read, err)
		}
		read++
	}
}
