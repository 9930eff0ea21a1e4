//go:build linux

package conntrack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/testhost"
)

// shortTimeouts are the kernel timeouts of issue 22's reproduction: a
// FIN-closed connection's TIME_WAIT entry, an aborted one's CLOSE entry
// and a UDP flow's entry all expire 3 s after their last packet.
var shortTimeouts = map[string]int{
	"nf_conntrack_tcp_timeout_time_wait": 3,
	"nf_conntrack_tcp_timeout_close":     3,
	"nf_conntrack_udp_timeout":           3,
	"nf_conntrack_udp_timeout_stream":    3,
}

// TestSourceLifecycle: with short kernel timeouts, 5 FIN-closed and 5
// RST-aborted TCP connections and 5 UDP flows (3 datagrams each, idle
// before the kernel drops them), plus a TCP connection and a UDP flow
// already open when the source starts, all run to their destruction
// (TIME_WAIT and CLOSE expire while the source runs). With events and
// with dumps only, every connection's records add up exactly to the
// counters the kernel reported when it destroyed the entry (conntrack -E,
// an independent listener), no record is empty, a finished TCP
// connection's last record is end, and a UDP flow reported idle first is
// not reported again with the same counts.
func TestSourceLifecycle(t *testing.T) {
	for _, events := range []bool{true, false} {
		t.Run(fmt.Sprintf("events=%v", events), func(t *testing.T) {
			t.Parallel() // each in its own test hosts; the kernel's timeouts take most of the time
			pr := trackedPair(t)
			w := startWitness(t, pr.B, pr.A)
			tcpServer(t, pr.B, 7200, 300, 2000)
			echoUDP(t, pr.B, 7300)
			tcpAddr, udpAddr := netip.AddrPortFrom(pr.B.Addr4, 7200), netip.AddrPortFrom(pr.B.Addr4, 7300)

			// Open before the source starts, with traffic before and after.
			opened := time.Now()
			preTCP, preTCPPort := tcpOpen(t, pr.A, tcpAddr)
			preTCP.send(t, 150)
			preUDP, preUDPPort := udpOpen(t, pr.A, udpAddr)
			preUDP.roundTrip(t, 100)
			// Short timeouts from here on: the kernel sets an entry's timeout
			// at each packet, so the flows above cannot expire before the
			// source starts, however slow the start.
			setTimeouts(t, pr.B, shortTimeouts)
			started := time.Now()

			s, stop := runSource(t, pr.B, SourceConfig{PollInterval: 250 * time.Millisecond, NoEvents: !events,
				Store: StoreConfig{ActiveTimeout: time.Hour, IdleTimeout: time.Second}})
			preUDP.roundTrip(t, 100)
			preUDP.Close()
			preTCP.finish(t, 150, 2000)

			kind := map[ctKey]string{{6, preTCPPort, 7200}: "tcp-preexisting", {17, preUDPPort, 7300}: "udp-preexisting"}
			for range 5 {
				kind[ctKey{6, tcpClient(t, pr.A, tcpAddr, 300, 2000, false), 7200}] = "tcp-fin"
				kind[ctKey{6, tcpClient(t, pr.A, tcpAddr, 300, 2000, true), 7200}] = "tcp-rst"
				kind[ctKey{17, exchange(t, pr.A, udpAddr, 3, 100), 7300}] = "udp"
			}
			// The entries expire 3 s after their last packet; the source's
			// dumps make the kernel drop them (an expired entry goes when a
			// dump meets it).
			if !w.wait(func() bool {
				for k := range kind {
					if _, ok := w.destroyed[k]; !ok {
						return false
					}
				}
				return true
			}, 40*time.Second) {
				t.Fatalf("the kernel did not destroy all %d entries within 40 s: %d destroyed", len(kind), len(w.final()))
			}
			// Two more polls: the source saw the last of them go.
			for p, deadline := s.Stats().Polls+2, time.Now().Add(20*time.Second); s.Stats().Polls < p; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("no poll within 20 s")
				}
			}
			recs := stop()
			w.mu.Lock()
			dups := w.dups
			w.mu.Unlock()
			if len(dups) > 0 {
				t.Fatalf("a tuple of the test was used by two kernel entries: %q", dups)
			}
			checkLifecycle(t, recs, w.final(), kind, s.Stats())
			// The first record of a connection open before the start begins
			// at the kernel's start stamp, not when weir first saw it.
			for _, k := range []ctKey{{6, preTCPPort, 7200}, {17, preUDPPort, 7300}} {
				first := int64(-1)
				for i := range recs {
					if recKey(&recs[i]) == k && (first < 0 || recs[i].Start < first) {
						first = recs[i].Start
					}
				}
				if first < opened.Add(-time.Second).UnixNano() || first > started.UnixNano() {
					t.Errorf("%s: first record starts at %s; want the kernel's start stamp, between %s and %s",
						kind[k], time.Unix(0, first).Format(time.StampMicro), opened.Format(time.StampMicro), started.Format(time.StampMicro))
				}
			}
		})
	}
}

// checkLifecycle checks that the records of every connection in kind add
// up to its final counters, that none is empty, and the end reasons.
func checkLifecycle(t *testing.T, recs []flow.Record, final map[ctKey]ctFinal, kind map[ctKey]string, st SourceStats) {
	t.Helper()
	by := map[ctKey][]flow.Record{}
	for _, r := range recs {
		if r.Packets+r.RevPackets == 0 {
			t.Errorf("empty record %s %v:%d → %v:%d reason %s", kind[recKey(&r)], r.Key.Src(), r.Key.SrcPort, r.Key.Dst(), r.Key.DstPort, r.EndReason)
		}
		by[recKey(&r)] = append(by[recKey(&r)], r)
	}
	keys := make([]ctKey, 0, len(kind))
	for k := range kind {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].sport < keys[j].sport })
	idleFirst := 0
	for _, k := range keys {
		f, rs := final[k], by[k]
		var got [2]Counters
		var reasons []string
		for _, r := range rs {
			got[0].Packets += r.Packets
			got[0].Bytes += r.Bytes
			got[1].Packets += r.RevPackets
			got[1].Bytes += r.RevBytes
			reasons = append(reasons, fmt.Sprintf("%s %d/%d", r.EndReason, r.Packets, r.RevPackets))
		}
		if got != [2]Counters{f.orig, f.reply} {
			t.Errorf("%s :%d: records %v add up to %v/%v, the kernel counted %v/%v", kind[k], k.sport, reasons, got[0], got[1], f.orig, f.reply)
			continue
		}
		if kind[k] != "udp" && kind[k] != "udp-preexisting" && rs[len(rs)-1].EndReason != flow.ReasonEnd {
			t.Errorf("%s :%d: records %v; want the last one end", kind[k], k.sport, reasons)
		}
		if rs[0].EndReason == flow.ReasonIdle {
			idleFirst++
		}
	}
	if idleFirst == 0 {
		t.Errorf("no connection was reported idle before its end: the test did not cover idle-then-destroy")
	}
	t.Logf("%d records; store %+v", len(recs), st.Store)
}

// tcpConn is a client connection kept open across the source's start.
type tcpConn struct{ *net.TCPConn }

// tcpOpen connects from h to dst and returns the connection and its port.
func tcpOpen(t *testing.T, h *testhost.Host, dst netip.AddrPort) (*tcpConn, uint16) {
	t.Helper()
	var c *net.TCPConn
	err := h.Do(func() error {
		d := net.Dialer{Timeout: 10 * time.Second}
		nc, err := d.Dial("tcp", dst.String())
		if err == nil {
			c = nc.(*net.TCPConn)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &tcpConn{c}, uint16(c.LocalAddr().(*net.TCPAddr).Port)
}

// send sends n bytes of the request (tcpServer answers once it has all).
func (c *tcpConn) send(t *testing.T, n int) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
}

// finish sends the rest of the request (n bytes), reads the answer (resp
// bytes) and closes with a full FIN exchange.
func (c *tcpConn) finish(t *testing.T, n, resp int) {
	t.Helper()
	c.send(t, n)
	buf := make([]byte, resp)
	for got := 0; got < resp; {
		n, err := c.Read(buf[got:])
		if err != nil {
			t.Fatalf("reading the answer: %d of %d bytes: %v", got+n, resp, err)
		}
		got += n
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(buf[:1]); n != 0 || err == nil {
		t.Fatalf("after our FIN: %d bytes, %v; want EOF", n, err)
	}
	c.Close()
}

// udpConn is a client UDP socket kept open across the source's start.
type udpConn struct{ *net.UDPConn }

// udpOpen opens a connected UDP socket from h to dst.
func udpOpen(t *testing.T, h *testhost.Host, dst netip.AddrPort) (*udpConn, uint16) {
	t.Helper()
	var c *net.UDPConn
	err := h.Do(func() (err error) {
		c, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &udpConn{c}, uint16(c.LocalAddr().(*net.UDPAddr).Port)
}

// roundTrip sends one datagram of size bytes and reads the echo (size/2).
func (c *udpConn) roundTrip(t *testing.T, size int) {
	t.Helper()
	if _, err := c.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, size)); err != nil || n != size/2 {
		t.Fatalf("echo: %d bytes, %v; want %d", n, err, size/2)
	}
}

// TestVanishBeforeDestroyKernel: the store driven by real dump and event
// sockets, with the destroy event read only after a dump that no longer
// lists the entry (as when the kernel redelivers it late). A UDP flow
// counts 3 exchanges (exported), 2 more (dumped, not exported), 1 more
// (not dumped); conntrack -D drops it and prints its final counters. The
// dump then misses it: its end record holds the 2 dumped exchanges; the
// destroy event read afterwards adds the last one. The records add up to
// what conntrack -D printed, and none is empty.
func TestVanishBeforeDestroyKernel(t *testing.T) {
	pr := trackedPair(t)
	ct := testhost.Need(t, "conntrack", "conntrack")
	echoUDP(t, pr.B, 7400)
	ev, err := OpenEvents(EventsConfig{Netns: pr.B.Do})
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	d, err := Open(Config{Netns: pr.B.Do})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s := NewStore(StoreConfig{Events: true, ActiveTimeout: time.Nanosecond, IdleTimeout: time.Hour, StaleTimeout: time.Hour})
	var recs []Export
	emit := func(x *Export) {
		if x.Orig.DstPort == 7400 {
			recs = append(recs, *x)
		}
	}
	update := func(c *Conn) { s.Update(c, time.Now()) }
	dumpEnd := func() {
		t.Helper()
		if err := d.Dump(0, func(c *Conn) error { update(c); return nil }); err != nil {
			t.Fatal(err)
		}
		s.EndPoll(time.Now())
	}
	readEvents := func() {
		t.Helper()
		if _, err := ev.Read(update); err != nil {
			t.Fatal(err)
		}
	}
	c, port := udpOpen(t, pr.A, netip.AddrPortFrom(pr.B.Addr4, 7400))
	for range 3 {
		c.roundTrip(t, 200)
	}
	readEvents()
	dumpEnd()
	s.Export(time.Now(), emit)
	for range 2 {
		c.roundTrip(t, 200)
	}
	dumpEnd()
	c.roundTrip(t, 200)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := pr.B.Exec(ctx, ct, "-D", "-p", "udp", "--orig-port-src", fmt.Sprint(port), "-o", "extended")
	if err != nil {
		t.Fatalf("conntrack -D: %v: %s", err, out)
	}
	_, final, ok := parseEvent(string(out))
	if !ok || final.orig.Packets != 6 {
		t.Fatalf("conntrack -D printed %q; want the entry with 6 packets", out)
	}
	dumpEnd() // the entry is gone; its destroy event waits in the socket
	s.Export(time.Now(), emit)
	if n := len(recs); n != 2 || recs[1].Reason != ExportEnd || recs[1].DeltaOrig.Packets != 2 {
		t.Fatalf("records before the destroy event: %+v; want the first 3 exchanges, then an end record of 2", recs)
	}
	for deadline := time.Now().Add(10 * time.Second); s.Len() > 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		readEvents()
		s.Export(time.Now(), emit) // removes the entry once its destroy event is read
	}
	var sum [2]Counters
	for _, x := range recs {
		if x.DeltaOrig == (Counters{}) && x.DeltaReply == (Counters{}) {
			t.Errorf("empty record %+v", x)
		}
		sum[0].Packets += x.DeltaOrig.Packets
		sum[0].Bytes += x.DeltaOrig.Bytes
		sum[1].Packets += x.DeltaReply.Packets
		sum[1].Bytes += x.DeltaReply.Bytes
	}
	if len(recs) != 3 || sum != [2]Counters{final.orig, final.reply} || s.Len() != 0 {
		t.Fatalf("records %+v add up to %v, conntrack -D printed %v/%v; %d held", recs, sum, final.orig, final.reply, s.Len())
	}
	if st := s.Stats(); st.Vanished != 1 || st.New != 1 {
		t.Errorf("stats %+v; want 1 vanished, 1 connection", st)
	}
}
