package query

import (
	"math/rand/v2"
	"testing"
)

// TestInternAgainstMap interns random addresses of both families (IPv4
// mapped, IPv6, an IPv6 row holding a mapped-looking address, a version 4
// row whose bytes are not mapped, a damaged row of version 0) through
// agg.addr, whose IPv4 table is the fast path (and the IPv6 table that of
// every other version), and checks it against a plain map: the same
// address as shown (addrOf) always gets the same id, different ones
// different ids, and every id expands back to what was interned, shown the
// same. Enough addresses to grow the table several times.
func TestInternAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	g := newAgg()
	want := map[addrKey]uint32{}
	for range 200000 {
		var k addrKey
		switch r.IntN(8) {
		case 0: // IPv6
			k.ver = 6
			for i := range k.a {
				k.a[i] = byte(r.IntN(4))
			}
		case 1: // a mapped-looking address in an IPv6 row: apart from the IPv4 one
			k.ver = 6
			k.a[10], k.a[11], k.a[15] = 0xff, 0xff, byte(r.IntN(256))
		case 2: // version 4 but not mapped (never stored), or a damaged row's 0: shown as the 16 bytes
			k.ver = uint8(4 * r.IntN(2))
			k.a[0], k.a[15] = 1, byte(r.IntN(64))
			if r.IntN(2) == 0 {
				k.a[0], k.a[10], k.a[11] = 0, 0xff, 0xff // version 0 with IPv4-mapped bytes
				k.ver = 0
			}
		default: // IPv4, drawn from 50,000 so that many repeat
			k.ver = 4
			k.a[10], k.a[11] = 0xff, 0xff
			v := r.Uint32N(50000) * 86629 // spread over the whole word
			k.a[12], k.a[13], k.a[14], k.a[15] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
		}
		id := g.addr(&k.a, k.ver)
		c := k // the address as shown: IPv4 only for version 4 with mapped bytes
		if c.ver != 4 || !v4Mapped(&c.a) {
			c.ver = 6
		}
		if w, ok := want[c]; ok && w != id {
			t.Fatalf("%v: id %d, earlier %d", k, id, w)
		}
		if id == 0 || int(id) > len(g.addrs) || g.addrs[id-1] != c || addrOf(&g.addrs[id-1].a, g.addrs[id-1].ver) != addrOf(&k.a, k.ver) {
			t.Fatalf("%v: id %d expands to something else", k, id)
		}
		want[c] = id
	}
	if len(g.addrs) != len(want) {
		t.Fatalf("%d ids for %d distinct addresses", len(g.addrs), len(want))
	}
	if g.v4.n < 40000 {
		t.Fatalf("only %d addresses took the IPv4 table", g.v4.n)
	}
	if g.v6.n < 1000 {
		t.Fatalf("only %d addresses took the IPv6 table", g.v6.n)
	}
}

// TestWriteFault checks that the tables' page touch keeps a fresh slice
// as it was (same array, every element zero) for any length.
func TestWriteFault(t *testing.T) {
	for _, n := range []int{0, 1, 169, 170, 171, 512, 513, 5000} {
		e := make([]v6Entry, n)
		if got := writeFault(e); len(got) != n || (n > 0 && &got[0] != &e[0]) {
			t.Fatalf("v6 %d: another slice", n)
		}
		for i := range e {
			if e[i] != (v6Entry{}) {
				t.Fatalf("v6 %d: entry %d not zero", n, i)
			}
		}
		w := writeFault(make([]uint64, n))
		for i, x := range w {
			if x != 0 || len(w) != n {
				t.Fatalf("v4 %d: word %d = %d", n, i, x)
			}
		}
	}
}

// TestGrowDouble checks that the address list's growth keeps its
// elements and always leaves room for one more, doubling when full.
func TestGrowDouble(t *testing.T) {
	var s []int
	for i := range 5000 {
		c := cap(s)
		s = growDouble(s)
		if len(s) != i || cap(s) <= len(s) || (c == i && c >= 64 && cap(s) < 2*c) {
			t.Fatalf("at %d: len %d cap %d (was %d)", i, len(s), cap(s), c)
		}
		s = append(s, i)
	}
	for i, x := range s {
		if x != i {
			t.Fatalf("element %d = %d", i, x)
		}
	}
}
