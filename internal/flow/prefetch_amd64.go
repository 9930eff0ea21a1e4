package flow

// prefetchSlot asks the CPU to fetch the slot at p into cache without
// waiting for it (assembly: Go has no prefetch intrinsic).
//
//go:noescape
func prefetchSlot(p uintptr)
