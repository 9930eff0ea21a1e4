package store

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"
)

// TestNoPktRoundTrip: a per-packet byte column whose block has rows
// without packets leaves them out (flagNoPkt) and reads back exact alone,
// with its packets and with everything; a block where every row or no row
// has packets keeps the plain per-packet form.
func TestNoPktRoundTrip(t *testing.T) {
	e := newTestEncoder(t)
	base := newGen(9).window(nil, 3000, t0, "x")
	for _, tc := range []struct {
		name  string
		zero  func(i int) bool
		nopkt bool
	}{
		{"every 13th without", func(i int) bool { return i%13 == 0 }, true},
		{"all but one without", func(i int) bool { return i != 1500 }, true},
		{"none without", func(int) bool { return false }, false},
		{"all without", func(int) bool { return true }, false},
	} {
		recs := slices.Clone(base)
		for i := range recs {
			r := &recs[i]
			r.RevPackets = uint64(1 + i%5)
			r.RevBytes = r.RevPackets * uint64(60+i%1400)
			if tc.zero(i) {
				r.RevPackets, r.RevBytes = 0, 0
			}
		}
		b, h := e.encode(nil, recs)
		c := h.cols[cRevBytes]
		if got := c.flags&flagNoPkt != 0; got != tc.nopkt || c.flags&flagPerPkt == 0 {
			t.Fatalf("%s: flags %#x, want no-packet rows left out %v", tc.name, c.flags, tc.nopkt)
		}
		for _, want := range []Column{ColRevBytes, ColRevBytes | ColRevPackets, ColAll} {
			got := readSpan(t, b, want)
			for i := range recs {
				if got.RevBytes[i] != recs[i].RevBytes {
					t.Fatalf("%s, columns %#x, row %d: %d, want %d", tc.name, want, i, got.RevBytes[i], recs[i].RevBytes)
				}
			}
		}
	}
}

// TestNoPktMalformed: flagNoPkt without the per-packet flag or in a
// version 9 block is a damaged header, and a stream holding another
// number of values than the rows with packets, or a remainder not under
// its packets, is a malformed stream.
func TestNoPktMalformed(t *testing.T) {
	recs := newGen(10).window(nil, 500, t0, "x")
	for i := range recs {
		r := &recs[i]
		r.RevPackets = uint64(i % 3)
		r.RevBytes = r.RevPackets * 100
	}
	recs = noDictE(recs) // so the block reads in version 10's layout
	for i := range recs {
		recs[i].RevPackets = uint64(i % 3)
		recs[i].RevBytes = recs[i].RevPackets * 100
	}
	b, h := newTestEncoder(t).encode(nil, recs)
	if h.cols[cRevBytes].flags != flagPerPkt|flagNoPkt {
		t.Fatalf("RevBytes flags %#x", h.cols[cRevBytes].flags)
	}
	pos, _ := walkDirV11(t, b)
	flags := pos[cRevBytes] + 2
	notPerPkt := slices.Clone(b)
	notPerPkt[flags] = flagNoPkt
	resealHeader(notPerPkt)
	if _, err := parseHeader(asVersion(t, b, 10), true); err != nil {
		t.Fatalf("in version 10's layout: %v", err)
	}
	for name, x := range map[string][]byte{
		"not per packet": notPerPkt,
		"version 9":      asVersion(t, b, 9),
	} {
		if _, err := parseHeader(x, true); !errors.Is(err, errCorruptBlock) {
			t.Errorf("%s: %v, want a damaged header", name, err)
		}
	}
	// Values for 2 rows where 3 have packets, and for 4.
	pk := []uint64{1, 0, 2, 5}
	var ie intEncoder
	for _, n := range []int{2, 4} {
		st, enc, _, _ := ie.encodeInts(nil, []uint64{1, 2, 3, 4}[:n], false, false, false)
		c := &colMeta{enc: enc, flags: flagPerPkt | flagNoPkt}
		if _, err := new(decoder).perPacketCol(&blockHeader{rows: 4, ncols: numCols}, nil, 0, c, st, 4, cRevPackets, pk, nil, false); !errors.Is(err, errBadStream) {
			t.Errorf("%d values for 3 rows with packets: %v", n, err)
		}
	}
	st, enc, _, _ := new(intEncoder).encodeInts(nil, []uint64{7, 8, 9}, false, false, false)
	v, err := new(decoder).perPacketCol(&blockHeader{rows: 4, ncols: numCols}, nil, 0, &colMeta{enc: enc, flags: flagPerPkt | flagNoPkt}, st, 4, cRevPackets, pk, nil, false)
	if err != nil || !slices.Equal(v, []uint64{7, 0, 16, 45}) {
		t.Fatalf("3 values for 3 rows with packets: %v, %v", v, err)
	}
	// A remainder not under its row's packets (2 of 1 packet).
	st, enc, _, _ = new(intEncoder).encodeInts(nil, []uint64{7 | 2<<16, 8, 9}, false, false, false)
	if _, err := new(decoder).perPacketCol(&blockHeader{rows: 4, ncols: numCols}, nil, 0, &colMeta{enc: enc, flags: flagPerPkt | flagNoPkt}, st, 4, cRevPackets, pk, nil, false); !errors.Is(err, errBadStream) {
		t.Errorf("remainder 2 of 1 packet: %v", err)
	}
}

// resealHeader recomputes a block header's CRC after a test changed it.
func resealHeader(b []byte) {
	hl := binary.LittleEndian.Uint32(b[8:12])
	binary.LittleEndian.PutUint32(b[hl-4:hl], crc32.Checksum(b[:hl-4], castagnoli))
}
