//go:build linux

package ebpf

import (
	"context"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/testhost"
)

// TestTCPGroundTruth is the live-capture source's TCP test with the same
// expectations: 200 TCP connections of varied sizes (IPv4 and IPv6),
// counted in the kernel while the map is drained every 20 ms; each
// connection's packets and IP bytes both ways equal those of dumpcap's
// capture of the same interface over the same period, dissected by
// tshark, in one record that ends with reason end.
func TestTCPGroundTruth(t *testing.T) {
	pr := testhost.NewPair(t)
	for _, v6 := range []bool{false, true} {
		name := map[bool]string{false: "ipv4", true: "ipv6"}[v6]
		t.Run(name, func(t *testing.T) {
			const conns, base = 200, 32000
			stopWitness := testhost.Dumpcap(t, pr.B)
			s, out, stop := startOut(t, pr.B, Config{EvictInterval: 20 * time.Millisecond}, pr.B.Iface)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ports := map[uint16]bool{}
			began := time.Now().UnixNano()
			for i := range conns {
				total, write := 1+(i*7919)%200000, 1+(i*31)%16384
				if _, err := testhost.TCPTransfer(ctx, pr.A, pr.B, v6, base+i, total, write); err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
				ports[uint16(base+i)] = true
			}
			ended := time.Now().UnixNano()
			// Ended connections reach the sink while the source runs (a
			// tick or two after their 1 s end linger), not at shutdown.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				out.mu.Lock()
				n := len(testhost.ByDstPort(out.recs, flow.ProtoTCP, pr.A.Addr(v6), pr.B.Addr(v6)))
				out.mu.Unlock()
				if n == conns {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d ended connections reached the sink before shutdown", n, conns)
				}
			}
			file := stopWitness()
			recs := stop()
			// Times: the first packet's is exact, the last's within a tick
			// (jiffies); both inside the traffic's span, give or take a tick.
			const tick = int64(10 * time.Millisecond) // HZ=100, the coarsest
			for _, r := range recs {
				if r.Key.Proto == flow.ProtoTCP && (r.Start > r.End || r.Start < began-tick || r.End > ended+tick) {
					t.Errorf("record %v: start %d, end %d outside the traffic's %d..%d", r.Key, r.Start, r.End, began, ended)
				}
			}
			if st := s.Stats(); st.Lost != 0 || st.Ring != 0 || st.InsertE2BIG != 0 {
				t.Errorf("stats %+v: no packet should have left the map", st)
			}
			want := testhost.TsharkTCP(t, file, ports)
			got := testhost.ByDstPort(recs, flow.ProtoTCP, pr.A.Addr(v6), pr.B.Addr(v6))
			testhost.CheckTCP(t, want, got, conns)
		})
	}
}

// TestShutdownEnded: a TCP connection closed with FIN both ways, or
// aborted with an RST, that is still in the kernel map or in the table's
// end linger when the source stops ends with reason end, as it would a
// linger later, not shutdown; a connection still open, or closed one way
// only, ends with shutdown. Drained only at the stop (the connections
// are in the kernel map), and drained every 20 ms (they are in the
// table, inside the linger).
func TestShutdownEnded(t *testing.T) {
	pr := testhost.NewPair(t)
	for _, tc := range []struct {
		name  string
		every time.Duration
	}{{"final drain", 30 * time.Second}, {"in the table", 20 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			s, stop := start(t, pr.B, Config{EvictInterval: tc.every,
				Table: flow.Config{MaxFlows: 1000, IdleTimeout: time.Hour, EndLinger: 30 * time.Second}}, pr.B.Iface)
			srv := tcpServe(t, pr.B)
			want := map[uint16]flow.EndReason{}
			for _, c := range []struct {
				close tcpClose
				want  flow.EndReason
			}{
				{closeFIN, flow.ReasonEnd}, {closeRST, flow.ReasonEnd}, {closeNone, flow.ReasonShutdown}, {closeHalf, flow.ReasonShutdown},
				{closeFIN, flow.ReasonEnd}, {closeRST, flow.ReasonEnd},
			} {
				want[tcpDial(t, pr.A, srv, c.close)] = c.want
			}
			if tc.every < time.Second {
				// Two drains: the table holds them, inside their 30 s linger.
				for n, deadline := s.Stats().Evictions[SourceHashmap][ReasonTimer]+2, time.Now().Add(10*time.Second); s.Stats().Evictions[SourceHashmap][ReasonTimer] < n; time.Sleep(5 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("no drain within 10 s")
					}
				}
			}
			recs := stop()
			got := map[uint16][]flow.EndReason{}
			for _, r := range recs {
				if r.Key.Proto == flow.ProtoTCP && r.Key.Dst() == pr.B.Addr4 {
					got[r.Key.SrcPort] = append(got[r.Key.SrcPort], r.EndReason)
				}
			}
			for port, w := range want {
				rs := got[port]
				if len(rs) == 0 || rs[len(rs)-1] != w {
					t.Errorf("connection from port %d: reasons %v, want the last %s", port, rs, w)
				}
			}
		})
	}
}

// tcpClose is how a test connection ends.
type tcpClose byte

const (
	closeFIN  tcpClose = 'F' // FIN both ways
	closeRST  tcpClose = 'R' // the client aborts: RST
	closeNone tcpClose = 'N' // still open when the source stops
	closeHalf tcpClose = 'H' // the client's FIN only: the server keeps its side open
)

// tcpServe accepts connections on h until the test ends. Each reads the
// client's first byte (a tcpClose), then to EOF or reset; after the
// client's FIN it closes too (closeFIN) or keeps its side open until the
// test ends (closeHalf).
func tcpServe(t *testing.T, h *testhost.Host) netip.AddrPort {
	t.Helper()
	var ln *net.TCPListener
	if err := h.Do(func() (err error) { ln, err = net.ListenTCP("tcp4", &net.TCPAddr{IP: h.Addr4.AsSlice()}); return err }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	quit := make(chan struct{})
	t.Cleanup(func() { close(quit); ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.AcceptTCP()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				var kind [1]byte
				if _, err := io.ReadFull(c, kind[:]); err != nil {
					return
				}
				if _, err := io.Copy(io.Discard, io.LimitReader(c, 1<<20)); err != nil {
					return // reset
				}
				if tcpClose(kind[0]) == closeHalf {
					<-quit
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

// tcpDial opens a connection from h to dst, sends a few bytes and ends it
// as kind says; it returns the client's port once the end is done (for
// closeFIN, the server's FIN has arrived).
func tcpDial(t *testing.T, h *testhost.Host, dst netip.AddrPort, kind tcpClose) uint16 {
	t.Helper()
	var c *net.TCPConn
	err := h.Do(func() error {
		nc, err := net.DialTimeout("tcp4", dst.String(), 10*time.Second)
		if err == nil {
			c = nc.(*net.TCPConn)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(append([]byte{byte(kind)}, make([]byte, 999)...)); err != nil {
		t.Fatal(err)
	}
	switch kind {
	case closeRST:
		if err := c.SetLinger(0); err != nil {
			t.Fatal(err)
		}
		c.Close()
	case closeFIN:
		c.CloseWrite()
		if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Fatalf("after our FIN: %d bytes, %v; want the server's FIN", n, err)
		}
		c.Close()
	case closeHalf:
		c.CloseWrite()
	}
	return uint16(c.LocalAddr().(*net.TCPAddr).Port)
}
