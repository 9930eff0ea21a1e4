package flow

// prefetchLines prefetches the cache line of every address in a
// (PREFETCHT0: it retires at once and never faults, so stale or zero
// entries are harmless). One call per chunk instead of one per packet:
// an assembly call costs ~10 instructions, a prefetch in it 2.
//
//go:noescape
func prefetchLines(a *lines)
