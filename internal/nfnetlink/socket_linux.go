//go:build linux

package nfnetlink

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Open creates a NETLINK_NETFILTER socket, inside the namespace netns
// enters (netns nil: the caller's), binds it with a kernel-chosen port id
// and sets its receive timeout. It returns the descriptor and that port id.
func Open(netns func(func() error) error, timeout unix.Timeval) (fd int, pid uint32, err error) {
	open := func() error {
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		if err != nil {
			return fmt.Errorf("netlink socket: %w", err)
		}
		return nil
	}
	if netns != nil {
		err = netns(open)
	} else {
		err = open()
	}
	if err != nil {
		return -1, 0, err
	}
	if err = setup(fd, &pid, timeout); err != nil {
		unix.Close(fd)
		return -1, 0, err
	}
	return fd, pid, nil
}

func setup(fd int, pid *uint32, timeout unix.Timeval) error {
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink bind: %w", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fmt.Errorf("netlink getsockname: %w", err)
	}
	if nl, ok := sa.(*unix.SockaddrNetlink); ok {
		*pid = nl.Pid
	}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &timeout); err != nil {
		return fmt.Errorf("netlink SO_RCVTIMEO: %w", err)
	}
	return nil
}

// Recv reads one datagram into buf with recvfrom(2) directly (unix.Recvfrom
// allocates a Sockaddr per call), retrying after EINTR, which it counts in
// eintr. MSG_TRUNC makes the kernel return the datagram's full length, so a
// buffer too small is an error, never a cut datagram. Other failures are
// the unix.Errno itself (ENOBUFS: the kernel dropped messages; EAGAIN: the
// receive timeout passed), for the caller to count and name.
func Recv(fd int, buf []byte, eintr *atomic.Uint64) (int, error) {
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])),
			uintptr(len(buf)), unix.MSG_TRUNC, 0, 0)
		switch e {
		case 0:
			if int(n) > len(buf) {
				return 0, fmt.Errorf("netlink datagram of %d bytes exceeds the %d-byte buffer", n, len(buf))
			}
			return int(n), nil
		case unix.EINTR:
			eintr.Add(1)
		default:
			return 0, e
		}
	}
}
