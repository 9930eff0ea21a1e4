package query

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// randDict is n distinct addresses of a block's dictionary with their
// versions: mostly IPv4 (mapped), some IPv6, a few of an odd version.
func randDict(r *rand.Rand, n int) ([][16]byte, []uint8) {
	dict, vers := make([][16]byte, 0, n), make([]uint8, 0, n)
	seen := map[[16]byte]bool{}
	for len(dict) < n {
		var a [16]byte
		v := uint8(4)
		switch k := r.IntN(20); {
		case k < 16: // a small range, so tables see repeats and collisions
			a[10], a[11] = 0xff, 0xff
			binary.BigEndian.PutUint32(a[12:], 0x0a000000+uint32(r.IntN(1<<16)))
		case k < 19:
			v = 6
			binary.BigEndian.PutUint64(a[:8], 0x20010db800000000)
			binary.BigEndian.PutUint64(a[8:], uint64(r.IntN(1<<14)))
		default:
			v = uint8(r.IntN(3)) // 0, 1, 2: damaged records
			binary.BigEndian.PutUint64(a[8:], r.Uint64())
		}
		if !seen[a] {
			seen[a] = true
			dict, vers = append(dict, a), append(vers, v)
		}
	}
	return dict, vers
}

// TestInternEntsAgainstAddr: internEnts (batched prefetch, the first
// probe of the IPv4 table inline) gives every entry the id g.addr gives,
// over blocks whose dictionaries overlap, and reports one past the
// largest id.
func TestInternEntsAgainstAddr(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	got, want := newAgg(), newAgg()
	for block := range 40 {
		dict, vers := randDict(r, 1+r.IntN(3000))
		var ents []uint32
		for x := range dict {
			if r.IntN(4) != 0 { // some entries unused
				ents = append(ents, uint32(x))
			}
		}
		ids := make([]uint32, len(ents))
		top := got.internEnts(dict, vers, ents, ids)
		wantTop := uint32(0)
		for j, x := range ents {
			id := want.addr(&dict[x], vers[x])
			if ids[j] != id {
				t.Fatalf("block %d entry %d (%x v%d): id %d, g.addr %d", block, x, dict[x], vers[x], ids[j], id)
			}
			wantTop = max(wantTop, id+1)
		}
		if top != wantTop {
			t.Fatalf("block %d: top %d, want %d", block, top, wantTop)
		}
	}
	if len(got.addrs) != len(want.addrs) {
		t.Fatalf("%d addresses interned, g.addr %d", len(got.addrs), len(want.addrs))
	}
}

// TestAddByID: addByID's batched adds equal one add per entry, ids
// repeated across blocks and batches of any length.
func TestAddByID(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const nID = 5000
	got, want := make([]sums, nID), make([]sums, nID)
	for range 30 {
		n := r.IntN(200)
		if r.IntN(3) == 0 {
			n = r.IntN(3 * aheadBatch) // around the batch length
		}
		acc := make([]sums, n+r.IntN(50))
		for x := range acc {
			acc[x] = sums{r.Uint64() >> 20, r.Uint64() >> 10, r.Uint64() >> 20, r.Uint64() >> 10, 1 + r.Uint64N(100)}
		}
		ents, ids := make([]uint32, n), make([]uint32, n)
		for j := range n {
			ents[j], ids[j] = uint32(r.IntN(len(acc))), uint32(r.IntN(nID))
		}
		addByID(got, acc, ents, ids)
		for j := range n {
			want[ids[j]].add(&acc[ents[j]])
		}
	}
	for id := range want {
		if got[id] != want[id] {
			t.Fatalf("id %d: %+v, want %+v", id, got[id], want[id])
		}
	}
}
