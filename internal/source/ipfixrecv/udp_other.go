//go:build !linux

package ipfixrecv

import (
	"context"
	"net"
	"syscall"
)

// oobLen is 0: only Linux reports a socket's drops with each datagram.
const oobLen = 0

// listenUDP binds a UDP socket with SO_REUSEPORT (so --sockets can bind
// several) and asks for a receive buffer of rcvbuf bytes, which the
// kernel may cap. Drops in the socket are not counted on this system:
// SO_RXQ_OVFL is Linux's.
func listenUDP(addr string, rcvbuf int) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			if serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEPORT, 1); serr != nil {
				return
			}
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf) // best effort: capped by the kernel
		})
		if err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp", addr)
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

// rxqOvfl finds no drop count: there is none off Linux.
func rxqOvfl([]byte) (uint32, bool) { return 0, false }
