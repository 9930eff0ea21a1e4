//go:build linux && !amd64 && !386

package testhost

import "syscall"

// sysSetns is setns(2)'s number.
const sysSetns = syscall.SYS_SETNS
