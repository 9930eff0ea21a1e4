//go:build !amd64

package prefetch

// Line is a no-op where no assembly prefetch is provided.
func Line(uintptr) {}

// Pair is a no-op where no assembly prefetch is provided.
func Pair(p, q uintptr) {}

// Lines is a no-op where no assembly prefetch is provided.
func Lines(ps []uintptr) {}
