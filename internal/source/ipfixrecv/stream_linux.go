package ipfixrecv

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// inQueue returns the bytes conn's socket has received that were not
// read yet (SIOCINQ), or 0.
func inQueue(conn net.Conn) int {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	if err := rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil {
		return 0
	}
	return max(n, 0)
}
