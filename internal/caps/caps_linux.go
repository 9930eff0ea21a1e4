//go:build linux

package caps

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// lastCap is the highest capability this kernel knows.
func lastCap() Cap {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 40
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 || n > 63 {
		return 40
	}
	return Cap(n)
}

// Current returns the calling thread's capability sets.
func Current() (State, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return State{}, fmt.Errorf("caps: capget: %w", err)
	}
	st := State{
		Effective:   Set(data[0].Effective) | Set(data[1].Effective)<<32,
		Permitted:   Set(data[0].Permitted) | Set(data[1].Permitted)<<32,
		Inheritable: Set(data[0].Inheritable) | Set(data[1].Inheritable)<<32,
	}
	for c := Cap(0); c <= lastCap(); c++ {
		if r, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err == nil && r == 1 {
			st.Bounding |= Of(c)
		}
		if r, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, uintptr(c), 0, 0); err == nil && r == 1 {
			st.Ambient |= Of(c)
		}
	}
	return st, nil
}

// Drop leaves every thread of the process with at most keep: in the
// permitted and effective sets (what it already has of keep), nothing
// inheritable or ambient, and — when the process may (CAP_SETPCAP) — a
// bounding set of keep too, so no exec could regain the rest. It also sets
// no_new_privs. What is dropped cannot be taken back. With nothing to drop
// it changes nothing; in a cgo binary it changes nothing and returns
// ErrCgo.
func Drop(keep Set) (Result, error) {
	st, err := Current()
	if err != nil {
		return Result{}, err
	}
	kept := st.Permitted & keep
	res := Result{Kept: kept, Dropped: st.Permitted &^ keep}
	if st.Permitted&^keep == 0 && st.Effective&^keep == 0 && st.Inheritable == 0 && st.Ambient == 0 {
		return res, nil // nothing to give up
	}
	// no_new_privs first: it is harmless, so it doubles as the probe for
	// AllThreadsSyscall (ENOTSUP with cgo) before anything else changes.
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); e != 0 {
		if e == syscall.ENOTSUP {
			return Result{Kept: st.Permitted}, ErrCgo
		}
		return Result{Kept: st.Permitted}, fmt.Errorf("caps: PR_SET_NO_NEW_PRIVS: %w", e)
	}
	if st.Ambient != 0 {
		if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); e != 0 {
			return Result{Kept: st.Permitted}, fmt.Errorf("caps: clearing the ambient set: %w", e)
		}
	}
	if st.Effective.Has(Setpcap) { // the bounding set, while CAP_SETPCAP is still effective
		for c := Cap(0); c <= lastCap(); c++ {
			if st.Bounding.Has(c) && !keep.Has(c) {
				if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0); e != 0 {
					return Result{Kept: st.Permitted}, fmt.Errorf("caps: dropping %s from the bounding set: %w", c, e)
				}
			}
		}
		res.Bounding = true
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{
		{Effective: uint32(kept), Permitted: uint32(kept)},
		{Effective: uint32(kept >> 32), Permitted: uint32(kept >> 32)},
	}
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return Result{Kept: st.Permitted}, fmt.Errorf("caps: capset: %w", e)
	}
	after, err := Current()
	if err != nil {
		return res, err
	}
	if after.Permitted != kept || after.Effective != kept {
		return res, errors.New("caps: capset did not take: permitted " + after.Permitted.String() + ", want " + kept.String())
	}
	return res, nil
}
