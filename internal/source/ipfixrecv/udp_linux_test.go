package ipfixrecv

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/ipfix"
)

// TestSocketDrops: while the collector does not read (its sink blocks),
// datagrams overflow a small receive buffer; the kernel's count of them
// (SO_RXQ_OVFL, reported with the next datagram) is exactly what was
// sent and not received.
func TestSocketDrops(t *testing.T) {
	g := &gateSink{open: make(chan struct{})}
	c, err := New(Config{Listen: []string{"udp://127.0.0.1:0"}, Sockets: 1, ReadBuffer: 4096, Batch: 1, FlushInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx, g); close(done) }()
	defer func() { cancel(); <-done }()
	u, err := net.Dial("udp", c.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	sent := 0
	send := func() {
		if _, err := u.Write(oneFieldMsg(uint32(sent), 1, true)); err != nil {
			t.Fatal(err)
		}
		sent++
	}
	send() // its record blocks the reader in the sink
	time.Sleep(100 * time.Millisecond)
	for range 500 {
		send()
	}
	close(g.open)
	last := settle(t, c)
	send() // carries the final count
	waitFor(t, "the last datagram", func() bool { return c.Stats().Messages[2] == last+1 })
	st := c.Stats()
	received := int(st.Messages[2])
	if st.SocketDrops == 0 || int(st.SocketDrops) != sent-received || st.Records != st.Messages[2] {
		t.Errorf("sent %d, received %d, socket drops %d", sent, received, st.SocketDrops)
	}
	t.Logf("sent %d datagrams, received %d, the kernel dropped %d", sent, received, st.SocketDrops)
}

// settle waits until c's UDP sockets have nothing queued and the
// messages counted stay the same for 100 ms (the workers publish their
// counters at least every FlushInterval), and returns that count.
func settle(t *testing.T, c *Collector) uint64 {
	t.Helper()
	queued := func() int { // the next datagram's size: 0 when none is queued (SIOCINQ, udp(7))
		n := 0
		for _, u := range c.udp {
			rc, err := u.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			rc.Control(func(fd uintptr) {
				q, _ := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
				n += q
			})
		}
		return n
	}
	var last uint64
	waitFor(t, "the queued datagrams to be read", func() bool {
		n := c.Stats().Messages[2]
		if n == last && n > 0 && queued() == 0 {
			return true
		}
		last = n
		time.Sleep(100 * time.Millisecond)
		return false
	})
	return last
}

// rcvbuf is a UDP socket's receive buffer size.
func rcvbuf(t *testing.T, u *net.UDPConn) int {
	rc, err := u.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	rc.Control(func(fd uintptr) { n, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF) })
	return n
}

// TestUDPFloods: a source announcing one-field templates under 4,100
// observation domains, then another flooding 64 KB datagrams of templates
// of 500 fields (paced so that the socket drops nothing), do not stop a
// third exporter's records: all arrive, while the budget holds (the heap
// under the full flood is measured in internal/ipfix's
// TestTemplateFloodHeap).
func TestUDPFloods(t *testing.T) {
	c, m, stop := run(t, Config{Listen: []string{"udp://127.0.0.1:0"}, Sockets: 2})
	defer stop()
	to := c.Addrs()[0].(*net.UDPAddr)
	window := max(1, rcvbuf(t, c.udp[0])/4/(66<<10)) // datagrams in flight: a quarter of the buffer
	flood := func(from string, msgs func(yield func([]byte) bool)) {
		u, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(from)}, to)
		if err != nil {
			t.Error(err)
			return
		}
		defer u.Close()
		base := c.Stats().Messages[2]
		sent := uint64(0)
		for b := range msgs {
			u.Write(b)
			sent++
			for end := time.Now().Add(10 * time.Second); c.Stats().Messages[2]+uint64(window) < base+sent; time.Sleep(time.Millisecond) {
				if time.Now().After(end) {
					t.Errorf("flood from %s: the collector stopped reading", from)
					return
				}
			}
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		flood("127.0.0.2", func(yield func([]byte) bool) {
			for dom := range uint32(4100) {
				if !yield(oneFieldMsg(0, dom, false)) {
					return
				}
			}
		})
		tmpl := make([]byte, 0, 65535)
		flood("127.0.0.4", func(yield func([]byte) bool) {
			for dom := range uint32(8) { // 8 MB of templates, twice the source's share of the budget
				for first := 256; first < 256+512; first += 32 {
					if !yield(floodTemplates(tmpl, dom, uint16(first), 32, 500)) {
						return
					}
				}
			}
		})
	}()
	want := randRecords(2000, 21)
	for i := 0; i < len(want); i += 200 { // while the floods run
		exportTo(t, "ipfix+udp://"+to.String(), nil, want[i:i+200])
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	waitRecords(t, m, len(want))
	settle(t, c)
	st := c.Stats()
	t.Logf("%d messages, %d sessions held, %d of %d bytes; evicted %v; refused %d/%d", st.Messages[2], st.SessionsLive,
		st.BudgetUsed, st.BudgetLimit, st.Evicted, st.Errors[ipfix.ErrExporterLimit], st.Errors[ipfix.ErrTemplateBudget])
	if st.SocketDrops != 0 || st.Records != uint64(len(want)) || st.Errors != [ipfix.NumDecodeErrors]uint64{} ||
		st.Evicted[ipfix.EvictExporterSessions] != 4100-ipfix.DefaultExporterSessions || st.Evicted[ipfix.EvictExporterBytes] == 0 ||
		st.BudgetUsed > st.BudgetLimit/ipfix.DefaultExporterShare+st.BudgetLimit/64 {
		t.Errorf("stats %+v", st)
	}
}
