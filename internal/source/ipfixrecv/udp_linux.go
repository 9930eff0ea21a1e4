package ipfixrecv

import (
	"context"
	"encoding/binary"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// oobLen is the control buffer a datagram's SO_RXQ_OVFL count fits in.
var oobLen = unix.CmsgSpace(4)

// listenUDP binds a UDP socket with SO_REUSEPORT, SO_RXQ_OVFL (each
// datagram then says how many the socket dropped so far) and a large
// receive buffer: SO_RCVBUFFORCE when privileged (past
// net.core.rmem_max), else SO_RCVBUF (capped by the kernel).
func listenUDP(addr string, rcvbuf int) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); serr != nil {
				return
			}
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1); serr != nil {
				return
			}
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf) != nil {
				_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf) // best effort
			}
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

// rxqOvfl returns the drop count of an SO_RXQ_OVFL control message in
// oob, if there is one (parsed in place: ParseSocketControlMessage would
// allocate per datagram once a socket has dropped any).
func rxqOvfl(oob []byte) (uint32, bool) {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		n := int(h.Len)
		if n < unix.SizeofCmsghdr || n > len(oob) {
			return 0, false
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SO_RXQ_OVFL && n >= unix.CmsgLen(4) {
			return binary.NativeEndian.Uint32(oob[unix.CmsgLen(0):]), true
		}
		oob = oob[min(unix.CmsgSpace(n-unix.CmsgLen(0)), len(oob)):]
	}
	return 0, false
}
