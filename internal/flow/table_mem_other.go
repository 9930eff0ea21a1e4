//go:build !linux

package flow

// allocSlots returns n zeroed slots from the Go heap.
func allocSlots(n int, _ *Table) []slot { return make([]slot, n) }
