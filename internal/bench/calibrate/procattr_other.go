//go:build !linux

package calibrate

import "syscall"

// killWithParent has no parent-death signal to ask for off Linux; the
// test hosts the servers run in are Linux-only anyway.
func killWithParent() *syscall.SysProcAttr { return nil }
