package flow

import "unsafe"

// stageKeys is prep for n keys stride bytes apart from keys into ring[0:n],
// each followed by the prefetch of its home tag line and home slot in
// tags and slots (nslots long): UpdateBatch's hash stage for a chunk of
// packets in one assembly call, with no spills around per-packet calls.
//
//go:noescape
func stageKeys(keys unsafe.Pointer, stride uintptr, n int, ring *pending, seed *[6]uint64, tags *uint32, slots *slot, nslots uint32)
