//go:build !amd64

package flow

// prefetchSlot is a no-op where no assembly prefetch is provided.
func prefetchSlot(uintptr) {}
