//go:build !linux

package main

// kernelAtLeast is false: the kernel features it gates are Linux's.
func kernelAtLeast(major, minor int) bool { return false }
