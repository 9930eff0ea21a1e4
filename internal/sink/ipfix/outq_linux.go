package ipfix

import (
	"net"

	"golang.org/x/sys/unix"
)

// unacked is the number of bytes written into c that its peer has not
// acknowledged (SIOCOUTQ: queued and sent but unacknowledged; it keeps its
// value after a reset, until the socket is closed).
func unacked(c *net.TCPConn) (uint64, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil {
		return 0, err
	}
	return uint64(n), ierr
}
