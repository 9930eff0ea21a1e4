package prefetch

// Line prefetches the cache line holding address p (PREFETCHT0: it retires
// at once and never faults, so any address is safe).
//
//go:noescape
func Line(p uintptr)
