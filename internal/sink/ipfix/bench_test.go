package ipfix

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/nfnetlink"
	"github.com/weir-dev/weir/internal/source/conntrack"
	"github.com/weir-dev/weir/internal/source/nflog"
)

// Shape of the Antrea-shaped cycle (issue 26): 20,000 connections and
// 20,000 deny flows held, 2,000 of each due per cycle.
const (
	benchConns = 20_000
	benchDeny  = 20_000
	benchDue   = 2_000
)

// BenchmarkAntreaCycle is one export cycle of an agent holding 20,000
// conntrack connections and 20,000 deny flows, 4,000 of them due. One op
// times exactly what Antrea's exporter does per cycle, with weir's own
// parts: finding the due flows in the stores that hold them (the
// conntrack source's conntrack.Store.Export, 2,000 dying connections
// ending; the NFLOG source's nflog.DenyTable.Expire, 2,000 deny flows
// idle), turning each into a flow.Record (their Record methods) in a
// reused batch, and Exporter.Write: encoding and sending it, unpaced, as
// IPFIX over UDP to a receiver on loopback that drains its socket. Not
// timed: the dump that updates the 20,000 connections before each cycle,
// replacing the ended ones, and the 2,000 new deny flows after it (the
// packets and polls of the cycle, not its export).
//
// mtu=1400 is the default (217 datagrams a cycle); mtu=65000 shows how
// much of the cycle is the kernel's per-datagram cost, and
// BenchmarkUDPFloor what the same datagrams cost without weir.
func BenchmarkAntreaCycle(b *testing.B) {
	for _, mtu := range []int{1400, 65000} {
		b.Run(fmt.Sprintf("mtu=%d", mtu), func(b *testing.B) { benchAntreaCycle(b, mtu) })
	}
}

// drain listens on loopback and reads (and drops) every datagram until
// the returned listener is closed.
func drain(b *testing.B) *net.UDPConn {
	l, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	l.SetReadBuffer(8 << 20)
	go func() {
		buf := make([]byte, 65536)
		for {
			if _, err := l.Read(buf); err != nil {
				return
			}
		}
	}()
	return l
}

// cycleState holds the stores of BenchmarkAntreaCycle and makes their
// next 4,000 flows due.
type cycleState struct {
	ct    *conntrack.Store
	conns []conntrack.Conn
	next  int // number of the next connection to create
	deny  *nflog.DenyTable
	dn    int // number of the next deny flow
	now   time.Time
	cycle int
	batch []flow.Record
}

func benchConn(i int) conntrack.Conn {
	src := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).As16()
	dst := netip.AddrFrom4([4]byte{192, 0, 2, byte(1 + i%9)}).As16()
	c := conntrack.Conn{Type: conntrack.MsgNew, Flags: nfnetlink.FlagMulti, Family: 2,
		Has: conntrack.HasOrig | conntrack.HasReply | conntrack.HasStatus | conntrack.HasCountersOrig |
			conntrack.HasCountersReply | conntrack.HasMark | conntrack.HasZone | conntrack.HasID,
		Orig:   conntrack.Tuple{Src: src, Dst: dst, SrcPort: uint16(1024 + i%60000), DstPort: 443, Proto: 6},
		Reply:  conntrack.Tuple{Src: dst, Dst: src, SrcPort: 443, DstPort: uint16(1024 + i%60000), Proto: 6},
		Status: conntrack.StatusConfirmed | conntrack.StatusSeenReply, ID: uint32(i + 1)}
	c.CountersOrig = conntrack.Counters{Packets: 100, Bytes: 10_000}
	c.CountersReply = conntrack.Counters{Packets: 50, Bytes: 50_000}
	return c
}

func newCycleState() *cycleState {
	s := &cycleState{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC), batch: make([]flow.Record, 0, 2*(benchDue+256))}
	s.ct = conntrack.NewStore(conntrack.StoreConfig{MaxConns: 32_768, ActiveTimeout: time.Hour, IdleTimeout: time.Hour, StaleTimeout: 24 * time.Hour})
	s.conns = make([]conntrack.Conn, benchConns)
	for i := range s.conns {
		s.conns[i] = benchConn(i)
	}
	s.next = benchConns
	var prefixes nflog.Prefixes
	prefixes.ID([]byte("egress-reject "))
	// Idle after benchDeny/benchDue cycles of a second: benchDeny held.
	s.deny = nflog.NewDenyTable(32_768, int64(benchDeny/benchDue)*int64(time.Second), &prefixes, func(d *nflog.DenyFlow) {
		s.batch = append(s.batch, flow.Record{})
		d.Record(&s.batch[len(s.batch)-1], "eth0")
	})
	return s
}

// setup is the untimed part before a cycle: a second passes, a dump
// updates every connection (2,000 of them dying, with their last counts).
func (s *cycleState) setup() {
	s.now = s.now.Add(time.Second)
	for i := range s.conns {
		c := &s.conns[i]
		if (i+s.cycle*benchDue)%benchConns < benchDue {
			c.Status |= conntrack.StatusDying
			c.CountersOrig.Packets++
			c.CountersOrig.Bytes += 1500
		}
		s.ct.Update(c, s.now)
	}
	s.ct.EndPoll(s.now)
	s.cycle++
}

// export is the timed part: find the due flows, turn them into records,
// write them. It returns the number of records.
func (s *cycleState) export(x *Exporter) (int, error) {
	s.batch = s.batch[:0]
	s.deny.Expire(s.now.UnixNano()) // deny flows first, as Antrea sends them
	s.ct.Export(s.now, func(e *conntrack.Export) {
		s.batch = append(s.batch, flow.Record{})
		e.Record(&s.batch[len(s.batch)-1])
	})
	return len(s.batch), x.Write(s.batch)
}

// after is the untimed part after a cycle: the ended connections are
// replaced by new ones, and 2,000 new deny flows come.
func (s *cycleState) after() {
	for i := range s.conns {
		if s.conns[i].Status.Dying() {
			s.conns[i] = benchConn(s.next)
			s.next++
		}
	}
	var p nflog.Packet
	k := nflog.DenyKey{Prefix: nflog.PrefixOther + 1, Group: 1}
	for range benchDue {
		i := s.dn
		s.dn++
		k.Flow = flow.Key{SrcAddr: netip.AddrFrom4([4]byte{172, byte(i >> 16), byte(i >> 8), byte(i)}).As16(),
			DstAddr: netip.AddrFrom4([4]byte{192, 0, 2, 200}).As16(), SrcPort: uint16(1024 + i%60000), DstPort: 22,
			Proto: 6, IPVersion: 4}
		s.deny.Add(&k, 60, s.now.UnixNano(), &p)
	}
}

func benchAntreaCycle(b *testing.B, mtu int) {
	l := drain(b)
	defer l.Close()
	x, err := New(Config{URL: "ipfix+udp://" + l.LocalAddr().String(), Rate: -1, MTU: mtu})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	s := newCycleState()
	// Warm up until the deny table holds benchDeny flows and the first
	// cycle's connections are exported.
	for range benchDeny/benchDue + 1 {
		s.setup()
		if _, err := s.export(x); err != nil {
			b.Fatal(err)
		}
		s.after()
	}
	before, calls := x.Stats(), x.tr.(*udpTransport).batch.calls
	var cpu time.Duration // of the timed part only
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		s.setup()
		b.StartTimer()
		c0 := cpuTime()
		n, err := s.export(x)
		cpu += cpuTime() - c0
		if err != nil {
			b.Fatal(err)
		}
		if n != 2*benchDue {
			b.Fatalf("%d records due in a cycle, want %d", n, 2*benchDue)
		}
		b.StopTimer()
		s.after()
		b.StartTimer()
	}
	b.StopTimer()
	// The receiver's reads during the timed part included (the collector's side of loopback).
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	st := x.Stats()
	if st.SendErrors != 0 || st.DroppedRecords != 0 || st.Records-before.Records != uint64(b.N*2*benchDue) {
		b.Fatalf("sent %d records, want %d: %+v", st.Records-before.Records, b.N*2*benchDue, st)
	}
	if s.ct.Len() != benchConns || s.deny.Len() != benchDeny {
		b.Fatalf("%d connections and %d deny flows held", s.ct.Len(), s.deny.Len())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(2*benchDue), "ns/record")
	b.ReportMetric(float64(st.Messages-before.Messages)/float64(b.N), "msgs/op")
	b.ReportMetric(float64(x.tr.(*udpTransport).batch.calls-calls)/float64(b.N), "sends/op")
}

// BenchmarkUDPFloor is the kernel's part of BenchmarkAntreaCycle/mtu=1400:
// the same 217 datagrams of 1,400 bytes (the last shorter) as a cycle
// sent through the same udpBatch (sendmmsg, UDP_SEGMENT) to the same
// draining receiver, with no store, no encoding and no exporter. What a
// cycle costs above this is weir's.
func BenchmarkUDPFloor(b *testing.B) {
	l := drain(b)
	defer l.Close()
	c, err := net.DialUDP("udp", nil, l.LocalAddr().(*net.UDPAddr))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	u := newUDPBatch(c, batchMessages)
	msg := make([]byte, 1400)
	var errs int
	done := func(_ int, err error) {
		if err != nil {
			errs++
		}
	}
	var cpu time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		c0 := cpuTime()
		for i := range 217 {
			m := msg
			if i == 216 {
				m = msg[:700]
			}
			if u.add(m, 18) {
				u.send(done)
				u.reset()
			}
		}
		u.send(done)
		u.reset()
		cpu += cpuTime() - c0
	}
	b.StopTimer()
	if errs != 0 {
		b.Fatalf("%d datagrams refused", errs)
	}
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(u.calls)/float64(b.N), "sends/op")
}

// BenchmarkAntreaRun is the work of one op of Antrea v2.4.0's
// BenchmarkExportConntrackConns at -benchtime 1x, in weir's parts: a
// store of 20,000 connections (2,000 of them dying), all idle and so all
// due; one op opens a new exporter (a UDP socket; the templates go with
// the first message), finds the 20,000 in the store
// (conntrack.Store.Export), turns them into records and writes them,
// and closes the exporter. Filling the store (the dump) is not timed.
// Antrea's op at -benchtime 100x is a hundredth of this work plus a
// reconnect (docs/benchmarks.md): compare per record.
func BenchmarkAntreaRun(b *testing.B) {
	l := drain(b)
	defer l.Close()
	url := "ipfix+udp://" + l.LocalAddr().String()
	conns := make([]conntrack.Conn, benchConns)
	for i := range conns {
		conns[i] = benchConn(i)
		if i%10 == 0 {
			conns[i].Status |= conntrack.StatusDying
		}
	}
	batch := make([]flow.Record, 0, benchConns)
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var cpu time.Duration
	var sent uint64
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		st := conntrack.NewStore(conntrack.StoreConfig{MaxConns: 32_768, ActiveTimeout: time.Hour, IdleTimeout: time.Second, StaleTimeout: 24 * time.Hour})
		for i := range conns {
			st.Update(&conns[i], t0)
		}
		st.EndPoll(t0)
		batch = batch[:0]
		b.StartTimer()
		c0 := cpuTime()
		x, err := New(Config{URL: url, Rate: -1})
		if err != nil {
			b.Fatal(err)
		}
		st.Export(t0.Add(2*time.Second), func(e *conntrack.Export) {
			batch = append(batch, flow.Record{})
			e.Record(&batch[len(batch)-1])
		})
		if err := x.Write(batch); err != nil {
			b.Fatal(err)
		}
		if err := x.Close(); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - c0
		b.StopTimer()
		s := x.Stats()
		if len(batch) != benchConns || s.Records != benchConns || s.DroppedRecords != 0 || s.SendErrors != 0 {
			b.Fatalf("%d due, %+v", len(batch), s)
		}
		sent += s.Messages
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchConns, "ns/record")
	b.ReportMetric(float64(sent)/float64(b.N), "msgs/op")
}
