package flow

import (
	"runtime"
	"syscall"
	"unsafe"
)

// hugeMin is the slot array size from which allocSlots maps memory itself
// and asks for transparent huge pages: a random probe into a big table
// then costs one cache miss instead of a cache miss plus a TLB miss and a
// page walk (on 4 KiB pages a 128 MiB table spans 32768 pages, far beyond
// the TLB). Smaller tables use the Go heap.
const hugeMin = 8 << 20

// allocSlots returns n zeroed slots. Large arrays come from an anonymous,
// populated mmap advised MADV_HUGEPAGE, released by a cleanup when owner is
// collected; slot holds no pointers, so memory outside the Go heap is safe.
func allocSlots(n int, owner *Table) []slot {
	size := n * int(unsafe.Sizeof(slot{}))
	if size < hugeMin {
		return make([]slot, n)
	}
	const huge = 2 << 20
	size = (size + huge - 1) &^ (huge - 1)
	// MAP_POPULATE faults the whole table in now: resident memory is flat
	// from the first packet (linear in MaxFlows, as promised) and no 2 MiB
	// page is zeroed on the capture path when a new flow first touches it.
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_ANON|syscall.MAP_PRIVATE|syscall.MAP_POPULATE)
	if err != nil {
		return make([]slot, n)
	}
	_ = syscall.Madvise(mem, 14) // MADV_HUGEPAGE; best effort: without it the table still works
	runtime.AddCleanup(owner, func(m []byte) { _ = syscall.Munmap(m) }, mem)
	return unsafe.Slice((*slot)(unsafe.Pointer(unsafe.SliceData(mem))), n)
}
