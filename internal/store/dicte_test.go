package store

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// dictEValues are n values: common ones (a few, many rows each), and
// singles values seen once, width bytes wide.
func dictEValues(r *rand.Rand, n, common, singles int, width uint) []uint64 {
	v := make([]uint64, 0, n)
	for i := range singles {
		v = append(v, 1<<(8*width-1)+uint64(i)*7919%(1<<(8*width-1)))
	}
	for len(v) < n {
		v = append(v, 3+uint64(r.IntN(common))*5)
	}
	r.Shuffle(len(v), func(i, j int) { v[i], v[j] = v[j], v[i] })
	return v
}

// TestDictERoundTrip: columns with many once-seen values are coded
// encDictE (one-byte and two-byte indexes, narrow and 8-byte escapes)
// and read back exact, through the plane coder too; with fewer than
// dictEMin once-seen values the plain dictionary is kept.
func TestDictERoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var e intEncoder
	var d intDecoder
	for _, tc := range []struct {
		name                    string
		n, common, singles      int
		width                   uint
		wantEnc, wantIW, wantEW int
	}{
		{"Packets-like", 5000, 180, 370, 3, encDictE, 1, 3},
		{"two-byte index", 5000, 400, 100, 2, encDictE, 2, 2},
		{"8-byte escapes", 3000, 50, 40, 8, encDictE, 1, 8},
		{"few singles", 3000, 50, dictEMin - 1, 3, encDict, 0, 0},
	} {
		v := dictEValues(r, tc.n, tc.common, tc.singles, tc.width)
		st, enc, lo, hi := e.encodeInts(nil, v, false, false, true)
		if int(enc) != tc.wantEnc || lo != slices.Min(v) || hi != slices.Max(v) {
			t.Fatalf("%s: encoding %d [%d, %d], want %d", tc.name, enc, lo, hi, tc.wantEnc)
		}
		if enc == encDictE {
			nesc := int(binary.LittleEndian.Uint32(st[14:]))
			// Order 1 (ascending entries as gaps) when the indexes fit a byte.
			if int(st[0]) != tc.wantIW || int(st[18]) != tc.wantEW || nesc != tc.singles || (st[19] == 1) != (tc.wantIW == 1) {
				t.Errorf("%s: index width %d, escape width %d, %d escapes, order %d", tc.name, st[0], st[18], nesc, st[19])
			}
		}
		got, err := decodeInts(&d, enc, st, len(v), []uint64(nil))
		if err != nil || !slices.Equal(got, v) {
			t.Fatalf("%s: %v, values differ", tc.name, err)
		}
		got32, err := decodeInts(&d, enc, st, len(v), []uint32(nil))
		for i := range v {
			if err != nil || got32[i] != uint32(v[i]) {
				t.Fatalf("%s: as uint32 row %d: %v", tc.name, i, err)
			}
		}
		var s segEncoder
		cuts := planeCuts(nil, enc, st, len(v))
		if len(cuts) == 0 {
			t.Fatalf("%s: no plane cuts", tc.name)
		}
		z := s.encode(nil, st, cuts)
		raw, err := new(segDecoder).decode(nil, z, len(st))
		if err != nil || !slices.Equal(raw, st) {
			t.Fatalf("%s: plane coding: %v", tc.name, err)
		}
	}
}

// TestDictEMalformed: every field of an encDictE stream out of its
// bounds, an index past the escape, more or fewer escaped rows than the
// count, and a stream cut or lengthened are malformed streams (never a
// panic, never an allocation sized by a field).
func TestDictEMalformed(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	v := dictEValues(r, 600, 20, 30, 2)
	var e intEncoder
	good, enc, _, _ := e.encodeInts(nil, v, false, false, true)
	if enc != encDictE || good[0] != 1 {
		t.Fatalf("encoding %d, index width %d", enc, good[0])
	}
	le := binary.LittleEndian
	size, nesc := int(le.Uint32(good[1:])), int(le.Uint32(good[14:]))
	vw := int(good[5])
	idx := dictEHead + size*vw // the index plane
	firstEsc, firstHit := -1, -1
	for i, x := range good[idx : idx+len(v)] {
		if int(x) == size && firstEsc < 0 {
			firstEsc = i
		}
		if int(x) < size && firstHit < 0 {
			firstHit = i
		}
	}
	mod := func(f func(x []byte) []byte) []byte { return f(slices.Clone(good)) }
	for name, st := range map[string][]byte{
		"short header":      good[:dictEHead-1],
		"index width 5":     mod(func(x []byte) []byte { x[0] = 5; return x }),
		"value width 9":     mod(func(x []byte) []byte { x[5] = 9; return x }),
		"escape width 9":    mod(func(x []byte) []byte { x[18] = 9; return x }),
		"order 2":           mod(func(x []byte) []byte { x[19] = 2; return x }),
		"size over rows":    mod(func(x []byte) []byte { le.PutUint32(x[1:], uint32(len(v)+1)); return x }),
		"huge size":         mod(func(x []byte) []byte { le.PutUint32(x[1:], 1<<32-1); return x }),
		"escapes over rows": mod(func(x []byte) []byte { le.PutUint32(x[14:], uint32(len(v)+1)); return x }),
		"huge escapes":      mod(func(x []byte) []byte { le.PutUint32(x[14:], 1<<32-1); return x }),
		"index past escape": mod(func(x []byte) []byte { x[idx+firstHit] = byte(size + 1); return x }),
		"one escape more":   mod(func(x []byte) []byte { x[idx+firstHit] = byte(size); return x }),
		"one escape less":   mod(func(x []byte) []byte { x[idx+firstEsc] = 0; return x }),
		"escape count+1":    mod(func(x []byte) []byte { le.PutUint32(x[14:], uint32(nesc+1)); return append(x, 0, 0) }),
		"cut":               good[:len(good)-1],
		"trailing byte":     append(slices.Clone(good), 0),
	} {
		if _, err := decodeInts(new(intDecoder), encDictE, st, len(v), []uint64(nil)); !errors.Is(err, errBadStream) {
			t.Errorf("%s: %v, want errBadStream", name, err)
		}
	}
	// Version 10 had no encDictE: a column claiming it is a damaged header.
	recs := baseRecs(400)
	for i := range recs {
		recs[i].Packets = uint64(2 + i%5)
		if i%10 == 0 {
			recs[i].Packets = 1000 + uint64(i)
		}
	}
	b, h := newTestEncoder(t).encode(nil, recs)
	if h.cols[cPackets].enc != encDictE {
		t.Fatalf("Packets encoding %d, want dicte", h.cols[cPackets].enc)
	}
	var c Columns
	if err := decodeBlock(b, true, &c); err != nil || !slices.EqualFunc(c.Packets, recs, func(p uint64, r flow.Record) bool { return p == r.Packets }) {
		t.Fatalf("block: %v", err)
	}
	if _, err := parseHeader(asVersion(t, b, 10), true); !errors.Is(err, errCorruptBlock) {
		t.Errorf("dicte in version 10: %v, want a damaged header", err)
	}
}

// TestDictRows1 checks decodeDictE's one-byte row loop against the plain
// per-row loop it replaced (an entry or the next escape per row, corrupt
// on an index past the escape or an escape count that differs): random
// indexes around the escape index, dictionaries of 0 to 300 entries,
// escape counts short, exact and long.
func TestDictRows1(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for round := range 3000 {
		size := r.IntN(301)
		if round%4 == 0 {
			size = r.IntN(8)
		}
		n := r.IntN(300)
		ip := make([]byte, n)
		esc := 0
		for i := range ip {
			switch r.IntN(6) {
			case 0:
				ip[i] = byte(min(size, 255))
			case 1:
				ip[i] = byte(r.IntN(256))
			default:
				ip[i] = byte(r.IntN(max(1, min(size, 256))))
			}
			if int(ip[i]) == size {
				esc++
			}
		}
		nesc := max(0, esc+r.IntN(3)-1)
		dv := make([]uint64, max(size+1, 256))
		for i := range size {
			dv[i] = r.Uint64()
		}
		ev := make([]uint64, nesc+1)
		for i := range nesc {
			ev[i] = r.Uint64()
		}
		want := make([]uint64, n)
		k, bad := 0, false // the plain loop
		for i, x := range ip {
			j := int(x)
			bad = bad || j > size || k > nesc
			v := dv[min(j, size)]
			if j == size {
				v = ev[min(k, nesc)]
				k++
			}
			want[i] = v
		}
		bad = bad || k != nesc
		got := make([]uint64, n)
		gk, top := dictRows1(got, ip, (*[256]uint64)(dv), size, ev[:nesc], make([]uint32, n+1))
		if gbad := top > size || gk != nesc; gbad != bad || !bad && !slices.Equal(got, want) {
			t.Fatalf("round %d (size %d, %d rows, %d escapes of %d): corrupt %v, want %v", round, size, n, gk, nesc, gbad, bad)
		}
	}
}
