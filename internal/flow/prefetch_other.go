//go:build !amd64

package flow

// prefetchLines is a no-op where no assembly prefetch is provided.
func prefetchLines(*lines) {}
