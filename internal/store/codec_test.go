package store

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/weir-dev/weir/internal/flow"
)

func newTestEncoder(t testing.TB) *blockEncoder {
	z, err := newZstdEncoder(zstd.SpeedFastest)
	if err != nil {
		t.Fatal(err)
	}
	return &blockEncoder{zenc: z}
}

// rowOf rebuilds a record from decoded columns. A translated row's
// PostNAT takes its protocol and ICMP type and code from the key (the
// store keeps only its addresses, ports and version).
func rowOf(c *Columns, i int) flow.Record {
	r := flow.Record{
		Key: flow.Key{SrcAddr: c.SrcAddr[i], DstAddr: c.DstAddr[i], SrcPort: c.SrcPort[i], DstPort: c.DstPort[i],
			Proto: c.Proto[i], ICMPType: c.ICMPType[i], ICMPCode: c.ICMPCode[i], IPVersion: c.IPVersion[i]},
		Packets: c.Packets[i], Bytes: c.Bytes[i], RevPackets: c.RevPackets[i], RevBytes: c.RevBytes[i],
		TCPFlags: c.TCPFlags[i], RevTCPFlags: c.RevTCPFlags[i], EndReason: flow.EndReason(c.EndReason[i]),
		VLAN: c.VLAN[i], Start: c.Start[i], End: c.End[i], Iface: c.Iface,
		DropPackets: c.DropPackets[i], DropBytes: c.DropBytes[i], DropReason: c.DropReason[i], Sampling: c.Sampling[i],
		PostNAT: flow.Key{SrcAddr: c.NATSrcAddr[i], DstAddr: c.NATDstAddr[i], SrcPort: c.NATSrcPort[i], DstPort: c.NATDstPort[i],
			IPVersion: c.NATVersion[i]},
		Verdict: flow.Verdict(c.Verdict[i]), Rule: c.Rule[i], Mark: c.Mark[i], Zone: c.Zone[i],
		SrcWorkload: c.SrcWorkload[i], DstWorkload: c.DstWorkload[i], Service: c.Service[i],
		ServiceMatch: flow.ServiceMatch(c.ServiceMatch[i]), Node: c.Node[i],
	}
	if r.NATed() {
		r.PostNAT.Proto, r.PostNAT.ICMPType, r.PostNAT.ICMPCode = r.Key.Proto, r.Key.ICMPType, r.Key.ICMPCode
	}
	return r
}

// roundTrip encodes recs as a block, decodes it and compares every row.
func roundTrip(t *testing.T, e *blockEncoder, recs []flow.Record) *blockHeader {
	t.Helper()
	b, h := e.encode(nil, recs)
	var c Columns
	if err := decodeBlock(b, true, &c); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if c.N != len(recs) {
		t.Fatalf("N = %d, want %d", c.N, len(recs))
	}
	for i := range recs {
		want := recs[i]
		want.Iface = ""
		if got := rowOf(&c, i); !recEq(got, want) {
			t.Fatalf("row %d:\n got %+v\nwant %+v", i, got, want)
		}
	}
	h2, err := parseHeader(b, true)
	if err != nil {
		t.Fatal(err)
	}
	if h2.cols != h.cols || h2.omit != h.omit || h2.rows != len(recs) || h2.blockLen != len(b) {
		t.Fatalf("header does not parse back")
	}
	return h
}

func v4(a, b, c, d byte) [16]byte {
	var x [16]byte
	flow.SetAddr4(&x, []byte{a, b, c, d})
	return x
}

func baseRecs(n int) []flow.Record {
	recs := make([]flow.Record, n)
	for i := range recs {
		recs[i] = flow.Record{Key: flow.Key{SrcAddr: v4(10, 0, 0, 1), DstAddr: v4(10, 0, 0, 2), SrcPort: 40000,
			DstPort: 443, Proto: 6, IPVersion: 4}, Packets: 3, Bytes: 180, Start: 1e18, End: 1e18 + 5}
	}
	return recs
}

func TestRoundTripEncodings(t *testing.T) {
	e := newTestEncoder(t)
	r := rand.New(rand.NewPCG(1, 2))
	const n = 3000

	t.Run("zero rows", func(t *testing.T) {
		h := roundTrip(t, e, nil)
		if h.minStart != 0 || h.maxEnd != 0 {
			t.Fatal("empty block has a time span")
		}
		for i := range h.cols {
			if h.omit&(1<<i) != 0 { // the sparse columns, all left out
				continue
			}
			if h.cols[i].enc != encConst && h.cols[i].enc != encARaw || i >= firstSparse {
				t.Fatalf("col %d enc %d", i, h.cols[i].enc)
			}
		}
	})
	t.Run("one row", func(t *testing.T) { roundTrip(t, e, baseRecs(1)) })
	t.Run("constant", func(t *testing.T) {
		h := roundTrip(t, e, baseRecs(n))
		for _, id := range []int{cSrcPort, cPackets, cBytes, cStart, cEnd} {
			if h.cols[id].enc != encConst || h.cols[id].slen != 8 {
				t.Errorf("col %d: enc %d len %d, want const of 8 bytes", id, h.cols[id].enc, h.cols[id].slen)
			}
		}
		// One service tuple: a one-entry tuple dictionary without index
		// planes, the columns it holds no bytes.
		if c := h.cols[cDstPort]; c.enc != encTuple || c.rlen != 4+1+tupleEntry {
			t.Errorf("DstPort enc %d rlen %d, want a tuple of 12 bytes", c.enc, c.rlen)
		}
		for _, id := range tupleCols {
			if c := h.cols[id]; c.enc != encTuple || c.flags != flagTuple || c.slen != 0 {
				t.Errorf("col %d: enc %d flags %d len %d, want in the tuple", id, c.enc, c.flags, c.slen)
			}
		}
		if c := h.cols[cProto]; c.min != 6 || c.max != 6 {
			t.Errorf("Proto range %d..%d, want 6..6", c.min, c.max)
		}
		// One distinct IPv4 address: dictionary of one 4-byte entry, 0-width indexes.
		if c := h.cols[cSrcAddr]; c.enc != encADict || c.rlen != 4+1+1+4 {
			t.Errorf("src addr enc %d rlen %d, want adict of 10 bytes", c.enc, c.rlen)
		}
	})
	t.Run("small range", func(t *testing.T) {
		recs := baseRecs(n)
		for i := range recs {
			recs[i].Packets = 100 + uint64(r.IntN(200))
			recs[i].VLAN = uint16(r.IntN(4096))
		}
		h := roundTrip(t, e, recs)
		if c := h.cols[cPackets]; c.enc != encFOR || c.min < 100 || c.max > 299 {
			t.Errorf("packets enc %d [%d,%d]", c.enc, c.min, c.max)
		}
	})
	t.Run("full range and extremes", func(t *testing.T) {
		recs := baseRecs(n)
		for i := range recs {
			recs[i].Bytes = r.Uint64()
			recs[i].RevBytes = math.MaxUint64 - uint64(i%2)
			recs[i].Packets = []uint64{0, math.MaxUint64}[i%2]
			recs[i].Start = []int64{math.MinInt64, math.MaxInt64, 0, -1}[i%4]
			recs[i].End = []int64{math.MaxInt64, math.MinInt64, -1, 1}[i%4]
			recs[i].Key.SrcPort, recs[i].Key.DstPort, recs[i].VLAN = 65535, uint16(i), 65535
			recs[i].TCPFlags, recs[i].EndReason = 255, flow.EndReason(255)
		}
		h := roundTrip(t, e, recs)
		if c := h.cols[cBytes]; c.comp != compRaw || c.rlen != 17+8*n {
			t.Errorf("random bytes: comp %d rlen %d, want raw %d", c.comp, c.rlen, 17+8*n)
		}
		if c := h.cols[cStart]; int64(c.min) != math.MinInt64 || int64(c.max) != math.MaxInt64 {
			t.Errorf("start range %d..%d", int64(c.min), int64(c.max))
		}
	})
	t.Run("sorted times", func(t *testing.T) {
		recs := baseRecs(n)
		for i := range recs {
			recs[i].Start = 1.7e18 + int64(i)*1e6 + int64(r.IntN(1000))*1000
			recs[i].End = recs[i].Start + int64(r.IntN(1000)) // short flows: End-Start is 2 bytes, End deltas 3
		}
		h := roundTrip(t, e, recs)
		if h.cols[cStart].enc != encDeltaU {
			t.Errorf("sorted start enc %d, want deltau (non-decreasing: plain differences)", h.cols[cStart].enc)
		}
		if h.cols[cEnd].flags&flagEndRel == 0 {
			t.Errorf("end not stored relative to start")
		}
	})
	t.Run("nearly sorted times", func(t *testing.T) {
		recs := baseRecs(n)
		for i := range recs { // jitter of up to 3 steps: some differences are negative
			recs[i].Start = 1.7e18 + int64(i)*1e6 + int64(r.IntN(3000))*1000
			recs[i].End = recs[i].Start + 5
		}
		h := roundTrip(t, e, recs)
		if h.cols[cStart].enc != encDelta {
			t.Errorf("nearly sorted start enc %d, want delta (zigzag differences)", h.cols[cStart].enc)
		}
	})
	t.Run("unsorted times", func(t *testing.T) {
		recs := baseRecs(n)
		for i := range recs {
			recs[i].Start = 1.7e18 + r.Int64N(300e9)
			recs[i].End = 1.7e18 + r.Int64N(300e9)
		}
		h := roundTrip(t, e, recs)
		if h.minStart < 1.7e18 || h.maxEnd >= 1.7e18+300e9 {
			t.Errorf("span %d..%d", h.minStart, h.maxEnd)
		}
	})
	t.Run("microsecond times scale", func(t *testing.T) {
		recs := baseRecs(n)
		for i := range recs {
			recs[i].Start = 1.7e18 + r.Int64N(300e6)*1000
		}
		h := roundTrip(t, e, recs)
		// 300e6 µs needs 29 bits: 4 byte planes instead of 5 for ns.
		if c := h.cols[cStart]; c.enc != encFOR || c.rlen != 17+4*n {
			t.Errorf("start enc %d rlen %d, want for %d", c.enc, c.rlen, 17+4*n)
		}
	})
	addrCase := func(name string, pick func(i int) ([16]byte, [16]byte, uint8), wantEnc uint8) {
		t.Run(name, func(t *testing.T) {
			recs := baseRecs(n)
			for i := range recs {
				recs[i].Key.SrcAddr, recs[i].Key.DstAddr, recs[i].Key.IPVersion = pick(i)
			}
			h := roundTrip(t, e, recs)
			if got := h.cols[cSrcAddr].enc; got != wantEnc && !(wantEnc == encADict && got == encADictD) {
				t.Errorf("enc %d, want %d", h.cols[cSrcAddr].enc, wantEnc)
			}
		})
	}
	rand6 := func() [16]byte {
		var a [16]byte
		for j := range a {
			a[j] = byte(r.Uint32())
		}
		a[0] = 0x20
		return a
	}
	addrCase("v4 only dict", func(i int) ([16]byte, [16]byte, uint8) {
		return v4(10, 0, byte(i%7), 1), v4(192, 168, byte(i%3), 9), 4
	}, encADict)
	addrCase("v6 only dict", func(i int) ([16]byte, [16]byte, uint8) {
		a := [16]byte{0x20, 1, 0xd, 0xb8, 15: byte(i % 50)}
		return a, a, 6
	}, encADict)
	addrCase("mixed", func(i int) ([16]byte, [16]byte, uint8) {
		if i%3 == 0 {
			return rand6(), rand6(), 6
		}
		return v4(byte(r.Uint32()), 1, 2, 3), v4(10, 0, 0, byte(i)), 4
	}, encADict) // 256 v4 values repeat: dictionary (256×4 + 1000×16 + 2 bytes/row) < raw (2000×4 + 1000×16)
	addrCase("random v4 incompressible", func(i int) ([16]byte, [16]byte, uint8) {
		return v4(byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())), v4(1, 2, 3, 4), 4
	}, encARaw)
	addrCase("random v6 incompressible", func(i int) ([16]byte, [16]byte, uint8) {
		return rand6(), rand6(), 6
	}, encARaw)
	t.Run("zipf", func(t *testing.T) {
		g := newGen(7)
		recs := g.window(nil, 5000, 1.7e18, "eth0")
		for i := range recs {
			recs[i].Iface = ""
		}
		h := roundTrip(t, e, recs)
		// Thousands of addresses, most seen once: the IPv4 entries as
		// deltas; hundreds of ports seen once: escapes.
		if h.cols[cSrcAddr].enc != encADictD || h.cols[cDstPort].enc != encDictE {
			t.Errorf("zipf: src addr enc %d, dst port enc %d", h.cols[cSrcAddr].enc, h.cols[cDstPort].enc)
		}
		if h.cols[cSrcAddr].comp == compRaw {
			t.Errorf("zipf addresses not compressed")
		}
	})
	t.Run("random bytes everywhere", func(t *testing.T) {
		recs := make([]flow.Record, n)
		for i := range recs {
			k := &recs[i].Key
			for j := range k.SrcAddr {
				k.SrcAddr[j], k.DstAddr[j] = byte(r.Uint32()), byte(r.Uint32())
			}
			k.SrcPort, k.DstPort = uint16(r.Uint32()), uint16(r.Uint32())
			k.Proto, k.ICMPType, k.ICMPCode, k.IPVersion = byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())
			recs[i].Packets, recs[i].Bytes, recs[i].RevPackets, recs[i].RevBytes = r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64()
			recs[i].TCPFlags, recs[i].RevTCPFlags, recs[i].EndReason = byte(r.Uint32()), byte(r.Uint32()), flow.EndReason(r.Uint32())
			recs[i].VLAN, recs[i].Start, recs[i].End = uint16(r.Uint32()), int64(r.Uint64()), int64(r.Uint64())
		}
		h := roundTrip(t, e, recs)
		for id := range h.cols {
			if h.cols[id].comp != compRaw {
				t.Errorf("col %d of random data stored compressed (%d of %d bytes)", id, h.cols[id].slen, h.cols[id].rlen)
			}
		}
	})
}

func TestDictionaryFrequencyOrder(t *testing.T) {
	e := newTestEncoder(t)
	recs := baseRecs(1000)
	for i := range recs {
		recs[i].Key.DstPort = []uint16{8080, 443, 443, 443, 53, 443, 22, 443}[i%8]
		recs[i].Key.SrcPort = uint16(1 + i%10) // width 1: no dictionary
	}
	recs[999].Key.DstPort = 65000 // widens the range to 2 bytes
	roundTrip(t, e, recs)
	st, enc, lo, hi := e.ie.encodeInts(nil, portsOf(recs), false, false, true)
	if enc != encDict || lo != 22 || hi != 65000 {
		t.Fatalf("enc %d lo %d hi %d", enc, lo, hi)
	}
	// 443 is most frequent: dictionary entry 0 holds 443-22.
	if size := int(st[1]) | int(st[2])<<8; size != 5 {
		t.Fatalf("dict size %d, want 5", size)
	}
	if v := uint64(st[14]) | uint64(st[14+5])<<8; v != 443-22 {
		t.Fatalf("first dictionary value %d, want %d", v, 443-22)
	}
}

func portsOf(recs []flow.Record) []uint64 {
	u := make([]uint64, len(recs))
	for i := range recs {
		u[i] = uint64(recs[i].Key.DstPort)
	}
	return u
}

func TestEscapeIface(t *testing.T) {
	for name, want := range map[string]string{
		"eth0": "eth0", "..": "%2E.", "../x": "%2E.%2Fx", "a/b": "a%2Fb", "": "%", ".x": "%2Ex",
		"en0.100": "en0.100", "a b%": "a%20b%25",
	} {
		if got := escapeIface(name); got != want {
			t.Errorf("escape(%q) = %q, want %q", name, got, want)
		}
	}
	for _, name := range []string{"eth0", "../x", "", ".a.b", "a%b/c d"} {
		if got := unescapeIface(escapeIface(name)); got != name {
			t.Errorf("unescape(escape(%q)) = %q", name, got)
		}
	}
	long := escapeIface(string(make([]byte, 300)))
	if len(long) != maxEscLen {
		t.Errorf("long name escaped to %d bytes", len(long))
	}
}
