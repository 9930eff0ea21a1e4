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
