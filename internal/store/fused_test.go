package store

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDecodeIntsOnePass: the one-pass paths of decodeInts (frame of
// reference of 0 to 3 byte planes, dictionaries of 1- and 2-byte
// indexes) give base + value·scale and the indexed entries, into
// uint64 and narrower columns, and an index past the dictionary is a
// bad stream.
func TestDecodeIntsOnePass(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 1000
	var d intDecoder
	for w := range 4 {
		base, scale := uint64(1000+r.IntN(100)), uint64(1+r.IntN(3))
		vals := make([]uint64, n)
		for i := range vals {
			if w > 0 {
				vals[i] = r.Uint64N(1 << (8 * w))
			}
		}
		st := []byte{byte(w)}
		st = binary.LittleEndian.AppendUint64(st, scale)
		st = binary.LittleEndian.AppendUint64(st, base)
		st = putPlanes(st, vals, w)
		got, err := decodeInts(&d, encFOR, st, n, []uint64(nil))
		if err != nil {
			t.Fatal(w, err)
		}
		got16, err := decodeInts(&d, encFOR, st, n, []uint16(nil))
		if err != nil {
			t.Fatal(w, err)
		}
		for i, v := range vals {
			if want := base + v*scale; got[i] != want || got16[i] != uint16(want) {
				t.Fatalf("FOR width %d row %d: %d and %d, want %d", w, i, got[i], got16[i], want)
			}
		}
	}
	for iw := 1; iw <= 2; iw++ {
		size := []int{0, 200, 700}[iw] // over 255 entries for two-byte indexes
		dict := make([]uint64, size)
		for i := range dict {
			dict[i] = r.Uint64N(1 << 40)
		}
		idx := make([]uint64, n)
		for i := range idx {
			idx[i] = r.Uint64N(uint64(size))
		}
		stream := func(idx []uint64) []byte {
			st := []byte{byte(iw)}
			st = binary.LittleEndian.AppendUint32(st, uint32(size))
			st = append(st, 5)                           // value width: 40 bits
			st = binary.LittleEndian.AppendUint64(st, 7) // base
			st = putPlanes(st, dict, 5)
			return putPlanes(st, idx, iw)
		}
		got, err := decodeInts(&d, encDict, stream(idx), n, []uint64(nil))
		if err != nil {
			t.Fatal(iw, err)
		}
		for i, x := range idx {
			if got[i] != dict[x]+7 {
				t.Fatalf("dict index width %d row %d: %d, want %d", iw, i, got[i], dict[x]+7)
			}
		}
		bad := slices.Clone(idx)
		bad[n/2] = uint64(size) // one past the last entry
		if _, err := decodeInts(&d, encDict, stream(bad), n, []uint64(nil)); err != errBadStream {
			t.Fatalf("dict index width %d: index past the dictionary: %v", iw, err)
		}
	}
}
