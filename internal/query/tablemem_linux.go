package query

import (
	"syscall"
	"unsafe"
)

// hugeMin is the table size from which slots come from an mmap advised
// MADV_HUGEPAGE: a random probe into a table of hundreds of MiB then costs
// a cache miss without a TLB miss and page walk on top, and a table that
// grows is unmapped at once instead of waiting for the collector (the
// shards' garbage would otherwise double the resident set).
const hugeMin = 64 << 10

// allocSlots returns n zeroed slots and a release func (nil for Go heap
// memory). Slots hold no pointers, so memory outside the heap is safe.
func allocSlots(n int) ([]slot, func()) {
	size := n * int(unsafe.Sizeof(slot{}))
	if size < hugeMin {
		return make([]slot, n), nil
	}
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]slot, n), nil
	}
	_ = syscall.Madvise(mem, 14) // MADV_HUGEPAGE before first touch; best effort
	// MADV_POPULATE_WRITE (Linux 5.14) faults the table in writable now. A
	// probe that reads an untouched slot would otherwise map the shared
	// zero page, and the write that follows would replace it with a TLB
	// shootdown to every CPU running a worker (a fifth of a query's time).
	_ = syscall.Madvise(mem, 23)
	return unsafe.Slice((*slot)(unsafe.Pointer(unsafe.SliceData(mem))), n), func() { _ = syscall.Munmap(mem) }
}
