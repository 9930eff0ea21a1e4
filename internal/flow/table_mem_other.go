//go:build !linux

package flow

// hugeMin is the Linux threshold for huge-page tables; elsewhere every
// table comes from the Go heap, and the constant only keeps tests portable.
const hugeMin = 4 << 20

// allocSlots returns n zeroed slots and their n zeroed tags from the Go heap.
func allocSlots(n int, _ *Table) ([]slot, []uint32) { return make([]slot, n), make([]uint32, n) }
