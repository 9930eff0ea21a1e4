package prefetch

import (
	"testing"
	"unsafe"
)

// TestLine: prefetching any address, mapped or not, is harmless.
func TestLine(t *testing.T) {
	b := make([]byte, 4096)
	Line(uintptr(unsafe.Pointer(&b[0])))
	Line(0)
	Line(^uintptr(0))
}

// TestPair: prefetching any two addresses, mapped or not, is harmless.
func TestPair(t *testing.T) {
	b := make([]byte, 4096)
	p := uintptr(unsafe.Pointer(&b[0]))
	Pair(p, p+88)
	Pair(0, ^uintptr(0))
}

// TestLines: prefetching a batch of any addresses, mapped or not, or an
// empty batch, is harmless.
func TestLines(t *testing.T) {
	b := make([]byte, 4096)
	p := uintptr(unsafe.Pointer(&b[0]))
	Lines(nil)
	Lines([]uintptr{p})
	Lines([]uintptr{p, p + 64, 0, ^uintptr(0), p + 4095})
}
