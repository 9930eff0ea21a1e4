package conntrack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/nfnetlink"
)

// benchSentinel marks the original-direction packet counter in a built
// message, so benchmarks can find it and bump it in place.
const benchSentinel = 0x5eed_0000_0000_0000

// benchMsgs builds n dump replies for distinct established TCP
// connections with DNAT (reply source differs), status, mark, id and
// counters, as the kernel lays them out, and the offset of each one's
// original packet counter.
func benchMsgs(tb testing.TB, n int) (msgs [][]byte, pktOff []int) {
	tb.Helper()
	for i := range n {
		src := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		dst := netip.AddrFrom4([4]byte{10, 96, 0, 10})
		be := netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), 7})
		sport := uint16(1024 + i%60000)
		m := newMsg(ipctnlMsgCtNew, nfnetlink.FlagMulti, 2).
			tuple(ctaTupleOrig, src, dst, 6, sport, 443).
			tuple(ctaTupleReply, be, src, 6, 8443, sport)
		m.begin(ctaProtoinfo).begin(ctaProtoinfoTCP).u8(ctaProtoinfoTCPState, TCPEstablished).end().end()
		m.be32(ctaStatus, uint32(StatusConfirmed|StatusAssured|StatusSeenReply|StatusDstNAT|StatusDstNATDone))
		m.be32(ctaMark, 0).be32(ctaTimeout, 431999).be32(ctaUse, 1).be32(ctaID, uint32(i+1)).be16(ctaZone, 0)
		m.counters(ctaCountersOrig, benchSentinel, 1500).counters(ctaCountersReply, 1, 60)
		b := m.bytes()
		off := bytes.Index(b, binary.BigEndian.AppendUint64(nil, benchSentinel))
		if off < 0 {
			tb.Fatal("sentinel not found")
		}
		binary.BigEndian.PutUint64(b[off:], 1)
		msgs, pktOff = append(msgs, b), append(pktOff, off)
	}
	return msgs, pktOff
}

// bconn is sconn with 24 bits of connection number in the source address.
func bconn(i int) Conn {
	c := *sconn(i, 1, 100, 1, 100)
	c.Orig.Src[13], c.Reply.Dst[13] = byte(i>>16), byte(i>>16)
	return c
}

// bump adds one packet to a built message's original counter.
func bump(msg []byte, off int) {
	binary.BigEndian.PutUint64(msg[off:], binary.BigEndian.Uint64(msg[off:])+1)
}

// BenchmarkPollStore is BenchmarkPoll without the decoder: the 20k
// connections are decoded once beforehand and each poll hands the store
// already decoded entries, as Antrea's Poll benchmark hands its store
// entries from a mock dumper. It is the like-for-like figure.
func BenchmarkPollStore(b *testing.B) {
	const conns, churn, ring = 10_000, 1_000, 20_000
	msgs, _ := benchMsgs(b, ring)
	cs := make([]Conn, ring)
	for i := range cs {
		if err := Decode(&cs[i], msgs[i]); err != nil {
			b.Fatal(err)
		}
	}
	s := NewStore(StoreConfig{MaxConns: 16_384, ActiveTimeout: time.Hour, IdleTimeout: time.Hour, StaleTimeout: 24 * time.Hour})
	off := 0
	now := t0
	poll := func() {
		for j := range conns {
			c := &cs[(off+j)%ring]
			c.CountersOrig.Packets++
			s.Update(c, now)
		}
		s.EndPoll(now)
		off = (off + churn) % ring
		now = now.Add(time.Second)
	}
	poll()
	s.Export(now, func(*Export) {})
	newBefore := s.Stats().New
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		poll()
		b.StopTimer()
		s.Export(now, func(*Export) {})
		b.StartTimer()
	}
	b.StopTimer()
	if got := s.Stats().New - newBefore; got != uint64(churn*b.N) || s.Len() != conns {
		b.Fatalf("%d new over %d polls, %d held; want %d per poll, %d held", got, b.N, s.Len(), churn, conns)
	}
}

// BenchmarkPoll is Antrea's Poll shape: a store holding 10k connections;
// one op is one poll cycle of 10k dump replies, decoded from their
// netlink bytes and fed to Update, in which 1k are new and 1k of the
// previous poll's are gone, then EndPoll. Every connection's counters
// grow between polls. The Export that removes the gone ones runs with
// the timer stopped (Antrea's Poll does not export either).
func BenchmarkPoll(b *testing.B) {
	const conns, churn, ring = 10_000, 1_000, 20_000
	msgs, offs := benchMsgs(b, ring)
	s := NewStore(StoreConfig{MaxConns: 16_384, ActiveTimeout: time.Hour, IdleTimeout: time.Hour, StaleTimeout: 24 * time.Hour})
	var d Decoder
	var c Conn
	off := 0
	now := t0
	poll := func() {
		for j := range conns {
			k := (off + j) % ring
			bump(msgs[k], offs[k])
			if err := d.Decode(&c, msgs[k]); err != nil {
				b.Fatal(err)
			}
			s.Update(&c, now)
		}
		s.EndPoll(now)
		off = (off + churn) % ring
		now = now.Add(time.Second)
	}
	poll()
	s.Export(now, func(*Export) {})
	if s.Len() != conns {
		b.Fatalf("store holds %d, want %d", s.Len(), conns)
	}
	newBefore := s.Stats().New
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		poll()
		b.StopTimer()
		s.Export(now, func(*Export) {})
		b.StartTimer()
	}
	b.StopTimer()
	if got := s.Stats().New - newBefore; got != uint64(churn*b.N) || s.Len() != conns {
		b.Fatalf("%d new over %d polls, %d held; want %d per poll, %d held", got, b.N, s.Len(), churn, conns)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*conns), "ns/conn")
}

// BenchmarkExport is Antrea's export-cycle shape: a store of 20k
// connections, every one with new counts since its last export and its
// active timeout expired, 2k of them dying (dying bit) in each cycle and
// replaced by 2k new ones. One op is one Export, emitting 20k records
// (18k active, 2k end) to a callback that reads them; the polls that set
// the cycle up run with the timer stopped. IPFIX encoding and sending
// (part of Antrea's number) are not included.
func BenchmarkExport(b *testing.B) {
	const conns, dying = 20_000, 2_000
	s := NewStore(StoreConfig{MaxConns: 32_768, ActiveTimeout: time.Second, IdleTimeout: time.Hour, StaleTimeout: 24 * time.Hour})
	cs := make([]Conn, conns)
	next := 0 // next connection number to create
	for i := range cs {
		cs[i] = bconn(next)
		next++
	}
	now := t0
	var sum uint64
	var ends int
	emit := func(x *Export) {
		sum += x.DeltaOrig.Bytes + x.DeltaReply.Bytes
		if x.Reason == ExportEnd {
			ends++
		}
	}
	cycle := 0
	setup := func() {
		now = now.Add(time.Second)
		for i := range cs {
			c := &cs[i]
			c.CountersOrig.Packets++
			c.CountersOrig.Bytes += 1500
			if (i+cycle*dying)%conns < dying {
				c.Status |= StatusDying
			}
			s.Update(c, now)
		}
		s.EndPoll(now)
		cycle++
	}
	replace := func() {
		for i := range cs {
			if cs[i].Status.Dying() {
				cs[i] = bconn(next)
				next++
			}
		}
	}
	setup()
	s.Export(now, emit)
	replace()
	ends = 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		setup()
		b.StartTimer()
		s.Export(now, emit)
		b.StopTimer()
		replace()
		b.StartTimer()
	}
	b.StopTimer()
	if ends != dying*b.N || s.Len() != conns { // the dying ones stay, silent, until gone
		b.Fatalf("%d end records over %d cycles, %d held", ends, b.N, s.Len())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*conns), "ns/conn")
}

// BenchmarkPollNew shows memory linear in connections: one op builds a
// store sized to N and polls N new connections into it (decoded from
// netlink bytes), for N = 2k, 4k, … 14k. B/op is the store's
// preallocation, so B/conn stays flat and allocs/op stay constant.
func BenchmarkPollNew(b *testing.B) {
	msgs, _ := benchMsgs(b, 14_000)
	for n := 2_000; n <= 14_000; n += 2_000 {
		b.Run(fmt.Sprintf("new=%dk", n/1000), func(b *testing.B) {
			var d Decoder
			var c Conn
			b.ReportAllocs()
			var s *Store
			for range b.N {
				s = NewStore(StoreConfig{MaxConns: n})
				for _, m := range msgs[:n] {
					if err := d.Decode(&c, m); err != nil {
						b.Fatal(err)
					}
					s.Update(&c, t0)
				}
				s.EndPoll(t0)
			}
			if s.Len() != n {
				b.Fatalf("store holds %d, want %d", s.Len(), n)
			}
		})
	}
}
