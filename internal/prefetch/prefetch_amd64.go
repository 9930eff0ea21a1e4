package prefetch

// Line prefetches the cache line holding address p (PREFETCHT0: it retires
// at once and never faults, so any address is safe).
//
//go:noescape
func Line(p uintptr)

// Pair prefetches the cache lines holding p and q in one call: an entry
// that may straddle two lines (prefetch its first and last word).
//
//go:noescape
func Pair(p, q uintptr)

// Lines prefetches the cache line holding each address of ps in one call:
// Go saves every live register around a call, so a loop that prefetches
// a batch ahead per call, not an entry ahead per call, keeps its values
// in registers.
//
//go:noescape
func Lines(ps []uintptr)
