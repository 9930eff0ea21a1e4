package flow

import (
	"runtime"
	"syscall"
	"unsafe"
)

// hugeMin is the table size (slots and tags) from which allocSlots maps
// memory itself and asks for transparent huge pages: a random probe into a
// big table then costs one cache miss instead of a cache miss plus a TLB
// miss and a page walk (on 4 KiB pages a 128 MiB table spans 32768 pages,
// far beyond the TLB; a 65,536-flow table of 8 MiB spans 2,048, a page
// each for a few hundred live flows). Smaller tables use the Go heap.
const hugeMin = 4 << 20

// allocSlots returns n zeroed slots and their n zeroed tags. Large tables
// (both arrays in one mapping, tags after the slots) come from an anonymous
// mmap, 2 MiB aligned and advised MADV_HUGEPAGE before it is populated (a
// mapping populated first is faulted in 4 KiB pages, which khugepaged
// collapses only slowly, if ever); it is released by a cleanup when owner
// is collected. Neither array holds pointers, so memory outside the Go heap
// is safe.
func allocSlots(n int, owner *Table) ([]slot, []uint32) {
	tagOff := n * int(unsafe.Sizeof(slot{})) // slots are 8-byte multiples: the tags start 4-byte aligned
	size := tagOff + 4*n
	if size < hugeMin {
		return make([]slot, n), make([]uint32, n)
	}
	const huge = 2 << 20
	size = (size + huge - 1) &^ (huge - 1)
	// One huge page more than needed, for a 2 MiB aligned window: the
	// untouched head and tail never become resident.
	mem, err := syscall.Mmap(-1, 0, size+huge, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]slot, n), make([]uint32, n)
	}
	skip := (huge - int(uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%huge)) % huge
	win := mem[skip : skip+size]
	_ = syscall.Madvise(win, 14) // MADV_HUGEPAGE; best effort: without it the table still works
	// Populate now: resident memory is flat from the first packet (linear
	// in MaxFlows, as promised) and no page is zeroed on the capture path
	// when a new flow first touches it. MADV_POPULATE_WRITE (Linux 5.14)
	// does it in one call; otherwise one write per 4 KiB page.
	if syscall.Madvise(win, 23) != nil {
		for i := 0; i < len(win); i += 4096 {
			win[i] = 0
		}
	}
	runtime.AddCleanup(owner, func(m []byte) { _ = syscall.Munmap(m) }, mem)
	return unsafe.Slice((*slot)(unsafe.Pointer(unsafe.SliceData(win))), n),
		unsafe.Slice((*uint32)(unsafe.Pointer(&win[tagOff])), n)
}
