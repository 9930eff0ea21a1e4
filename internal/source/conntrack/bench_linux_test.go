//go:build linux

package conntrack

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/nfnetlink"
	"github.com/weir-dev/weir/internal/testhost"
)

// TestCaptureDump1000 rewrites testdata/dump1000.bin.gz, the replay input
// of BenchmarkDecode, from a live kernel (go test -run TestCaptureDump1000
// -capture): 1,000 UDP flows, 600 over IPv4 and 400 over IPv6, in B's
// conntrack table. Without -capture it is skipped.
func TestCaptureDump1000(t *testing.T) {
	if !*capture {
		t.Skip("only with -capture")
	}
	pr := trackedPair(t)
	testhost.ManyUDP(t, pr.A, pr.B, false, 7000, 20000, 600)
	testhost.ManyUDP(t, pr.A, pr.B, true, 7000, 30000, 400)
	conns, raw := dump(t, pr.B)
	if len(conns) != 1000 {
		t.Fatalf("%d entries, want 1000", len(conns))
	}
	writeCapture(t, "dump1000.bin.gz", raw)
}

// TestDumpMany dumps a table of 3,000 UDP entries (2,000 IPv4, 1,000
// IPv6), which spans many datagrams, through Socket.Dump with a small
// receive buffer, and checks that every flow is there exactly once with
// the packets and IP bytes ManyUDP sent, and no reply traffic.
func TestDumpMany(t *testing.T) {
	pr := trackedPair(t)
	const port = 7000
	want := map[bool]map[uint16][2]uint64{
		false: testhost.ManyUDP(t, pr.A, pr.B, false, port, 20000, 2000),
		true:  testhost.ManyUDP(t, pr.A, pr.B, true, port, 40000, 1000),
	}
	s, err := Open(Config{Netns: pr.B.Do, BufSize: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seen := map[bool]map[uint16]bool{false: {}, true: {}}
	err = s.Dump(unix.AF_UNSPEC, func(c *Conn) error {
		o := c.Orig
		w, ok := want[o.V6][o.SrcPort]
		switch {
		case !ok || o.Proto != unix.IPPROTO_UDP || o.DstPort != port || o.SrcAddr() != pr.A.Addr(o.V6) || o.DstAddr() != pr.B.Addr(o.V6):
			t.Errorf("unexpected entry %+v", o)
		case seen[o.V6][o.SrcPort]:
			t.Errorf("entry %+v twice", o)
		case c.CountersOrig != (Counters{w[0], w[1]}) || c.CountersReply != (Counters{}):
			t.Errorf("entry %+v: counters %+v / %+v, sent %v", o, c.CountersOrig, c.CountersReply, w)
		}
		seen[o.V6][o.SrcPort] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v6 := range []bool{false, true} {
		if len(seen[v6]) != len(want[v6]) {
			t.Errorf("v6=%v: %d of %d flows dumped", v6, len(seen[v6]), len(want[v6]))
		}
	}
	if st := s.Stats(); st.Messages != 3000 || st.Datagrams < 10 || st.Rejected != 0 || st.ENOBUFS != 0 {
		t.Errorf("stats %+v: 3,000 messages in many datagrams expected", st)
	}
	// Only one family: the kernel filters by nfgenmsg family.
	n := 0
	if err := s.Dump(unix.AF_INET6, func(c *Conn) error {
		if !c.Orig.V6 {
			t.Errorf("IPv4 entry in an AF_INET6 dump: %+v", c.Orig)
		}
		n++
		return nil
	}); err != nil || n != 1000 {
		t.Errorf("AF_INET6 dump: %d entries, %v", n, err)
	}
	// The answer to another request (here: a get without a tuple, which
	// the kernel refuses with EINVAL) waiting ahead of the dump is skipped
	// and counted, not taken for the dump's end.
	stray := newMsg(ipctnlMsgCtGet, nfnetlink.FlagRequest, unix.AF_INET).bytes()
	binary.NativeEndian.PutUint32(stray[nfnetlink.MsgSeqOff:], 0xfffffff0)
	if err := s.send(stray); err != nil {
		t.Fatal(err)
	}
	before := s.Stats().Foreign
	n = 0
	if err := s.Dump(unix.AF_INET6, func(*Conn) error { n++; return nil }); err != nil || n != 1000 {
		t.Errorf("dump after a stray request: %d entries, %v", n, err)
	}
	if f := s.Stats().Foreign - before; f != 1 {
		t.Errorf("%d foreign messages skipped, want 1", f)
	}
}

// BenchmarkDump dumps a conntrack table of 10,000 UDP entries (5,000 IPv4,
// 5,000 IPv6) from a test namespace through Socket.Dump, decoding every
// entry; it reports ns per entry. Needs root.
func BenchmarkDump(b *testing.B) {
	pr := trackedPair(b)
	const perFamily = 5000
	testhost.ManyUDP(b, pr.A, pr.B, false, 7000, 20000, perFamily)
	testhost.ManyUDP(b, pr.A, pr.B, true, 7000, 20000, perFamily)
	s, err := Open(Config{Netns: pr.B.Do})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var n int
	count := func(*Conn) error { n++; return nil }
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		n = 0
		if err := s.Dump(unix.AF_UNSPEC, count); err != nil {
			b.Fatal(err)
		}
		if n != 2*perFamily {
			b.Fatalf("%d entries, want %d", n, 2*perFamily)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*perFamily), "ns/entry")
	if st := s.Stats(); st.Rejected != 0 || st.ENOBUFS != 0 {
		b.Errorf("stats %+v", st)
	}
}
