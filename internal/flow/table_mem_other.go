//go:build !linux

package flow

// allocSlots returns n zeroed slots and their n zeroed tags from the Go heap.
func allocSlots(n int, _ *Table) ([]slot, []uint32) { return make([]slot, n), make([]uint32, n) }
