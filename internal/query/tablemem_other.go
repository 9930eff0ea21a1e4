//go:build !linux

package query

// allocSlots returns n zeroed slots from the Go heap (no mapping).
func allocSlots(n int) ([]slot, []byte) { return make([]slot, n), nil }

// growSlots never grows in place off Linux: the table copies instead.
func growSlots([]byte, int) ([]slot, []byte, bool) { return nil, nil, false }

// freeSlots has nothing to free: Go heap memory.
func freeSlots([]byte) {}
