//go:build !amd64

package flow

import "unsafe"

// stageKeys is prep for n keys stride bytes apart from keys into ring[0:n];
// without assembly there is no prefetch, so tags, slots and nslots go unused.
func stageKeys(keys unsafe.Pointer, stride uintptr, n int, ring *pending, seed *[6]uint64, tags *uint32, slots *slot, nslots uint32) {
	rs := unsafe.Slice(ring, n)
	for i := range rs {
		prepSeeded(seed, (*Key)(unsafe.Add(keys, uintptr(i)*stride)), &rs[i])
	}
}
