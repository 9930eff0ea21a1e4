package query

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugeMin is the table size from which slots come from an mmap advised
// MADV_HUGEPAGE: a random probe into a table of hundreds of MiB then costs
// a cache miss without a TLB miss and page walk on top, and a table that
// grows is unmapped at once instead of waiting for the collector (the
// shards' garbage would otherwise double the resident set).
const hugeMin = 64 << 10

// allocSlots returns n zeroed slots and, when they were mapped outside the
// Go heap, their mapping (nil for Go heap memory; freeSlots releases it).
// Slots hold no pointers, so memory outside the heap is safe.
func allocSlots(n int) ([]slot, []byte) {
	size := n * int(unsafe.Sizeof(slot{}))
	if size < hugeMin {
		return make([]slot, n), nil
	}
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return make([]slot, n), nil
	}
	populate(mem)
	return slotsOf(mem), mem
}

// populate advises mem MADV_HUGEPAGE and faults it in writable (best
// effort). MADV_POPULATE_WRITE (Linux 5.14) faults now: a probe that reads
// an untouched slot would otherwise map the shared zero page, and the
// write that follows would replace it with a TLB shootdown to every CPU
// running a worker (a fifth of a query's time).
func populate(mem []byte) {
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE) // before first touch
	_ = unix.Madvise(mem, unix.MADV_POPULATE_WRITE)
}

// hugePage is the size of a transparent huge page on the architectures
// that have one this large (a mapping of a multiple of it is aligned to it).
const hugePage = 2 << 20

// growSlots extends mapping mem (from allocSlots or growSlots) to n slots
// with mremap: the slots it holds keep their pages and only the new ones
// are faulted in (zeroed), instead of a fresh mapping of all n slots and
// a copy. ok is false when mem is nil, when it grows from below a huge
// page to one or more (its 4 KiB pages would stay small once extended: TLB
// misses on every probe; a fresh mapping of whole huge pages then), or
// when the kernel refused; mem is then still valid.
func growSlots(mem []byte, n int) (slots []slot, grown []byte, ok bool) {
	size := n * int(unsafe.Sizeof(slot{}))
	if mem == nil || size <= len(mem) || (len(mem) < hugePage && size >= hugePage) || len(mem)%min(hugePage, len(mem)) != 0 {
		return nil, nil, false
	}
	old := len(mem)
	grown, err := unix.Mremap(mem, size, unix.MREMAP_MAYMOVE)
	if err != nil {
		return nil, nil, false
	}
	_ = unix.Madvise(grown, unix.MADV_HUGEPAGE) // the whole mapping, should it have moved
	_ = unix.Madvise(grown[old:], unix.MADV_POPULATE_WRITE)
	return slotsOf(grown), grown, true
}

// freeSlots unmaps mem (nil: nothing to do).
func freeSlots(mem []byte) {
	if mem != nil {
		_ = unix.Munmap(mem)
	}
}

// slotsOf is mapping mem as slots.
func slotsOf(mem []byte) []slot {
	return unsafe.Slice((*slot)(unsafe.Pointer(unsafe.SliceData(mem))), len(mem)/int(unsafe.Sizeof(slot{})))
}
