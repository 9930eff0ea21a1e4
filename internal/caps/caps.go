// Package caps drops the Linux capabilities a running weir no longer
// needs. Once its sockets are open and its programs loaded, a live capture
// keeps only what it uses while it runs (CAP_NET_RAW to open the rings of
// interfaces that appear later, for example) and gives up the rest for
// good: from the effective, permitted, inheritable, ambient and bounding
// sets, on every thread.
//
// Capabilities belong to threads, not processes, on Linux, and the Go
// runtime runs goroutines on many threads: Drop changes them all at once
// with syscall.AllThreadsSyscall, which the runtime supports only in
// binaries built without cgo (CGO_ENABLED=0, as 'make build' does);
// elsewhere Drop changes nothing and returns ErrCgo.
package caps

import (
	"errors"
	"strings"
)

// Cap is a capability number (linux/capability.h).
type Cap uint8

// The capabilities weir's sources use, and a few it drops that are worth
// naming in tests.
const (
	Chown          Cap = 0
	DACOverride    Cap = 1
	DACReadSearch  Cap = 2
	Fowner         Cap = 3
	Setuid         Cap = 7
	Setpcap        Cap = 8
	NetBindService Cap = 10
	NetAdmin       Cap = 12
	NetRaw         Cap = 13
	SysPtrace      Cap = 19
	SysAdmin       Cap = 21
	SysResource    Cap = 24
	Perfmon        Cap = 38
	BPF            Cap = 39
)

var names = map[Cap]string{
	0: "cap_chown", 1: "cap_dac_override", 2: "cap_dac_read_search", 3: "cap_fowner", 4: "cap_fsetid",
	5: "cap_kill", 6: "cap_setgid", 7: "cap_setuid", 8: "cap_setpcap", 9: "cap_linux_immutable",
	10: "cap_net_bind_service", 11: "cap_net_broadcast", 12: "cap_net_admin", 13: "cap_net_raw",
	14: "cap_ipc_lock", 15: "cap_ipc_owner", 16: "cap_sys_module", 17: "cap_sys_rawio", 18: "cap_sys_chroot",
	19: "cap_sys_ptrace", 20: "cap_sys_pacct", 21: "cap_sys_admin", 22: "cap_sys_boot", 23: "cap_sys_nice",
	24: "cap_sys_resource", 25: "cap_sys_time", 26: "cap_sys_tty_config", 27: "cap_mknod", 28: "cap_lease",
	29: "cap_audit_write", 30: "cap_audit_control", 31: "cap_setfcap", 32: "cap_mac_override",
	33: "cap_mac_admin", 34: "cap_syslog", 35: "cap_wake_alarm", 36: "cap_block_suspend",
	37: "cap_audit_read", 38: "cap_perfmon", 39: "cap_bpf", 40: "cap_checkpoint_restore",
}

// String returns the capability's name as capabilities(7) writes it.
func (c Cap) String() string {
	if n, ok := names[c]; ok {
		return n
	}
	return "cap_" + itoa(int(c))
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// Set is a set of capabilities: bit n is capability n.
type Set uint64

// Of returns the set of cs.
func Of(cs ...Cap) Set {
	var s Set
	for _, c := range cs {
		s |= 1 << c
	}
	return s
}

// Has reports whether c is in s.
func (s Set) Has(c Cap) bool { return c < 64 && s&(1<<c) != 0 }

// String lists s by name, comma-separated ("none" when empty).
func (s Set) String() string {
	var b strings.Builder
	for c := Cap(0); c < 64; c++ {
		if s.Has(c) {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(c.String())
		}
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// State is a thread's capability sets.
type State struct {
	Effective, Permitted, Inheritable, Bounding, Ambient Set
}

// Result says what Drop did.
type Result struct {
	Kept     Set  // in the permitted and effective sets now
	Dropped  Set  // taken out of the permitted set
	Bounding bool // the bounding set was cut to Kept too (needs CAP_SETPCAP)
}

// Sentinel errors.
var (
	// ErrCgo: the binary uses cgo, so the runtime cannot change the
	// capabilities of all its threads; nothing was changed.
	ErrCgo = errors.New("caps: this binary is built with cgo, so the capabilities of all its threads cannot be changed (build it with CGO_ENABLED=0)")
	// ErrUnsupported: not Linux.
	ErrUnsupported = errors.New("caps: capabilities are a Linux feature")
)
