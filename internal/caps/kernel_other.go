//go:build !linux

package caps

// KernelAtLeast is false: not Linux.
func KernelAtLeast(major, minor int) bool { return false }
