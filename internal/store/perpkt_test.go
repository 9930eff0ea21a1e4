package store

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestPerPacketRoundTrip: blocks whose byte counts are whole packets or
// not, with edge rows (no packets, one packet, a 64 KiB mean size, counts
// near 2^64), decode to the rows written, whichever columns are asked
// for; the per-packet form is used exactly when every row fits it, and
// the directory's min and max are the byte counts' own.
func TestPerPacketRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	e := newTestEncoder(t)
	type edge struct {
		name   string
		pk, by uint64
		fits   bool
		rev    bool // the edge row goes in RevPackets/RevBytes
	}
	edges := []edge{
		{"none", 0, 0, true, false},
		{"no packets, no bytes", 0, 0, true, true},
		{"one packet of 65535", 1, 65535, true, false},
		{"one packet of 65536", 1, 65536, false, false},
		{"bytes without packets", 0, 40, false, true},
		{"mean size 2^16", 3, 3 << 16, false, false},
		{"near 2^64", 1 << 50, math.MaxUint64, false, true},
		{"2^48 packets, remainder 2^48-1", 1<<48 + 5, (1<<48 + 5) + 1<<48 - 1, true, false},
		{"remainder 2^48", 1<<48 + 5, (1<<48 + 5) + 1<<48, false, false},
	}
	for _, ed := range edges {
		for _, whole := range []bool{true, false} {
			recs := newGen(r.Uint64()).window(nil, 300, t0, "x")
			if !whole { // a mean size and a remainder: real counters
				for i := range recs {
					if recs[i].Packets > 1 {
						recs[i].Bytes += uint64(r.IntN(int(recs[i].Packets)))
					}
				}
			}
			k := r.IntN(len(recs))
			if ed.rev {
				recs[k].RevPackets, recs[k].RevBytes = ed.pk, ed.by
			} else {
				recs[k].Packets, recs[k].Bytes = ed.pk, ed.by
			}
			b, h := e.encode(nil, recs)
			col := cBytes
			if ed.rev {
				col = cRevBytes
			}
			if got := h.cols[col].flags&flagPerPkt != 0; got != ed.fits {
				t.Errorf("%s: per-packet %v, want %v", ed.name, got, ed.fits)
			}
			var lo, hi uint64 = math.MaxUint64, 0
			for i := range recs {
				v := recs[i].Bytes
				if ed.rev {
					v = recs[i].RevBytes
				}
				lo, hi = min(lo, v), max(hi, v)
			}
			if c := h.cols[col]; c.min != lo || c.max != hi {
				t.Errorf("%s: directory range %d..%d, want %d..%d", ed.name, c.min, c.max, lo, hi)
			}
			sorted := recs // the encoder keeps the rows' order (the Store sorts before it)
			for _, want := range []Column{ColAll, ColBytes, ColRevBytes, ColBytes | ColRevPackets, ColPackets | ColRevBytes} {
				hp, err := parseHeader(b, true)
				if err != nil {
					t.Fatal(err)
				}
				var c Columns
				lo, hi := hp.span(want)
				blk := make([]byte, len(b)) // only the span's bytes: the packets must be in it
				copy(blk[lo:hi], b[lo:hi])
				if err := new(decoder).decodeCols(hp, blk, 0, want, &c, true); err != nil {
					t.Fatalf("%s, columns %#x: %v", ed.name, want, err)
				}
				for i := range sorted {
					if want&ColBytes != 0 && c.Bytes[i] != sorted[i].Bytes || want&ColRevBytes != 0 && c.RevBytes[i] != sorted[i].RevBytes {
						t.Fatalf("%s, columns %#x, row %d: bytes %d/%d, want %d/%d", ed.name, want, i,
							c.Bytes[i], c.RevBytes[i], sorted[i].Bytes, sorted[i].RevBytes)
					}
					if want&ColPackets != 0 && c.Packets[i] != sorted[i].Packets || want&ColRevPackets != 0 && c.RevPackets[i] != sorted[i].RevPackets {
						t.Fatalf("%s, columns %#x, row %d: packets %d/%d", ed.name, want, i, c.Packets[i], c.RevPackets[i])
					}
				}
			}
		}
	}
}

// TestPerPacketMalformed: a per-packet value whose remainder is not under
// its packets, that has bytes without packets, or whose count overflows
// is a malformed stream, never a wrong number or a panic.
func TestPerPacketMalformed(t *testing.T) {
	h := &blockHeader{rows: 1, ncols: numCols}
	for _, c := range []struct{ pk, v uint64 }{
		{3, 3 << 16},                        // r = 3, packets 3
		{0, 1},                              // q = 1 with no packets
		{0, 1 << 16},                        // r = 1 with no packets
		{1 << 60, 0xffff},                   // q × packets overflows
		{math.MaxUint64, 1 | (1<<48-1)<<16}, // q × packets + r overflows
	} {
		v := []uint64{c.v}
		if err := new(decoder).perPacket(h, nil, 0, cPackets, []uint64{c.pk}, v, false); !errors.Is(err, errBadStream) {
			t.Errorf("packets %d, value %#x: %v (decoded %d), want malformed", c.pk, c.v, err, v[0])
		}
	}
	v := []uint64{7 | 2<<16}
	if err := new(decoder).perPacket(h, nil, 0, cPackets, []uint64{3}, v, false); err != nil || v[0] != 23 {
		t.Errorf("7 per packet of 3, remainder 2: %d, %v", v[0], err)
	}
}

// TestPerPacketStore: through a Store, a query for Bytes alone reads
// the same numbers as one for Bytes and Packets (the reader fetches the
// packets the per-packet form needs).
func TestPerPacketStore(t *testing.T) {
	s := openT(t, Config{Dir: tempDir(t), NoSync: true, Writeout: time.Hour})
	for _, w := range windows()[:2] {
		if err := s.Write(w); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	bl, err := s.Blocks(0, 0, nil)
	if err != nil || len(bl) != 2 {
		t.Fatalf("%d blocks, %v", len(bl), err)
	}
	for i := range bl {
		if bl[i].h.cols[cBytes].flags&flagPerPkt == 0 || bl[i].h.cols[cRevBytes].flags&flagPerPkt == 0 {
			t.Fatalf("block %d: byte columns not per packet", i)
		}
		var all, one Columns
		if err := s.ReadBlock(&bl[i], ColAll, &all); err != nil {
			t.Fatal(err)
		}
		if err := s.ReadBlock(&bl[i], ColBytes|ColRevBytes, &one); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < all.N; j++ {
			if one.Bytes[j] != all.Bytes[j] || one.RevBytes[j] != all.RevBytes[j] || all.Bytes[j]%all.Packets[j] != 0 {
				t.Fatalf("block %d row %d: bytes %d/%d alone, %d/%d with packets %d", i, j, one.Bytes[j], one.RevBytes[j], all.Bytes[j], all.RevBytes[j], all.Packets[j])
			}
		}
	}
}
