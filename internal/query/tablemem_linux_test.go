package query

import "testing"

// TestGrowSlots extends a mapping of whole huge pages in place: the slots
// it held keep their contents and the new ones are zero; a mapping below
// a huge page, or Go heap slots, are left to the copying resize.
func TestGrowSlots(t *testing.T) {
	n := hugePage / 64
	sl, mem := allocSlots(n)
	if mem == nil {
		t.Skip("mmap refused: Go heap slots")
	}
	for i := range sl {
		sl[i].k.addrs, sl[i].c.Flows = uint64(i), uint64(i)+1
	}
	big, grown, ok := growSlots(mem, 2*n)
	if !ok {
		freeSlots(mem)
		t.Fatal("a mapping of a huge page did not grow")
	}
	defer freeSlots(grown)
	if len(big) != 2*n || len(grown) != 2*hugePage {
		t.Fatalf("grown to %d slots, %d bytes", len(big), len(grown))
	}
	for i := range big {
		want := slot{}
		if i < n {
			want.k.addrs, want.c.Flows = uint64(i), uint64(i)+1
		}
		if big[i] != want {
			t.Fatalf("slot %d: %+v, want %+v", i, big[i], want)
		}
	}
	small, smem := allocSlots(hugePage / 64 / 2)
	defer freeSlots(smem)
	if _, _, ok := growSlots(smem, 2*len(small)); ok {
		t.Fatal("a mapping grew in place from below a huge page to one: its small pages would stay small")
	}
	tiny, tmem := allocSlots(hugeMin / 64)
	if tmem == nil {
		t.Fatal("a table of hugeMin bytes is not mapped")
	}
	tiny[len(tiny)-1].c.Flows = 7
	tiny, tmem, ok = growSlots(tmem, 2*len(tiny))
	if !ok || len(tiny) != 2*hugeMin/64 || tiny[hugeMin/64-1].c.Flows != 7 || tiny[len(tiny)-1] != (slot{}) {
		t.Fatalf("a mapping below a huge page did not double in place (%v, %d slots)", ok, len(tiny))
	}
	freeSlots(tmem)
	if _, _, ok := growSlots(nil, 64); ok {
		t.Fatal("Go heap slots grew in place")
	}
}
