package flow

import (
	"unsafe"

	"github.com/weir-dev/weir/internal/prefetch"
)

// prefetchSlot asks the CPU to fetch the slot at p into cache without
// waiting for it: its first and last words lie in the (at most two) cache
// lines it spans, wherever it starts.
func prefetchSlot(p uintptr) { prefetch.Pair(p, p+unsafe.Sizeof(slot{})-8) }
