package flow

import "unsafe"

// prefetchDistance is how many packets ahead UpdateBatch hashes and
// prefetches: enough to cover a memory miss (~100-200 ns) with the work of
// applying the packets in between, few enough that the slots are still
// cached when applied. A power of two (ring index by mask).
const prefetchDistance = 32

// pending is a packet whose key is canonical and hashed, waiting to be
// applied.
type pending struct {
	w   keyWords
	h   uint32
	dir uint8
}

// UpdateBatch is Update for each packet of ps, in order, with the same
// result. It is software-pipelined: while packet i is applied, packet
// i+16's key is made canonical and hashed and its home slot prefetched, so
// the memory misses of a big table overlap with useful work instead of
// stalling it one by one. It pays off when the table is much larger than
// the CPU caches; for small tables Update is as fast. It does not allocate.
func (t *Table) UpdateBatch(ps []Packet) {
	var ring [prefetchDistance]pending
	base := uintptr(unsafe.Pointer(unsafe.SliceData(t.slots)))
	const size = unsafe.Sizeof(slot{})
	ahead := min(len(ps), prefetchDistance)
	for i := 0; i < ahead; i++ {
		r := &ring[i]
		r.dir = canonical(&ps[i].Key, &r.w)
		r.h = t.hash(&r.w)
		prefetchSlot(base + uintptr(fastrange(r.h, t.n))*size)
	}
	for i := range ps {
		r := &ring[i&(prefetchDistance-1)]
		t.apply(&ps[i], &r.w, r.dir, r.h)
		if k := i + prefetchDistance; k < len(ps) { // reuse r's ring entry for packet k
			r.dir = canonical(&ps[k].Key, &r.w)
			r.h = t.hash(&r.w)
			prefetchSlot(base + uintptr(fastrange(r.h, t.n))*size)
		}
	}
}
