package engine

import (
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/bench/profile"
)

func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}

func addrPort(sa unix.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	}
	return netip.AddrPort{}
}

// newSock creates a blocking socket with sliced timeouts and the op's
// options (TCP_NODELAY, buffer sizes).
func newSock(proto profile.Proto, v6 bool, op *profile.Op) (*sock, error) {
	fam, typ := unix.AF_INET, unix.SOCK_STREAM
	if v6 {
		fam = unix.AF_INET6
	}
	if proto == profile.UDP {
		typ = unix.SOCK_DGRAM
	}
	fd, err := unix.Socket(fam, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	s := &sock{fd: fd, proto: proto, v6: v6}
	tv := unix.NsecToTimeval(sliceTimeout.Nanoseconds())
	for _, o := range []int{unix.SO_RCVTIMEO, unix.SO_SNDTIMEO} {
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, o, &tv); err != nil {
			s.close()
			return nil, fmt.Errorf("timeouts: %w", err)
		}
	}
	if op != nil {
		if err := s.options(op); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// options applies a connect op's socket options.
func (s *sock) options(op *profile.Op) error {
	if op.WndSz > 0 {
		for _, o := range []int{unix.SO_SNDBUF, unix.SO_RCVBUF} {
			if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, o, op.WndSz); err != nil {
				return fmt.Errorf("wndsz: %w", err)
			}
		}
	}
	if op.NoDelay && s.proto == profile.TCP {
		if err := unix.SetsockoptInt(s.fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
			return fmt.Errorf("nodelay: %w", err)
		}
	}
	return nil
}

func (s *sock) close() {
	if s != nil && s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}

// timedOut reports whether err is a sliced timeout (or a signal).
func timedOut(err error) bool {
	return err == unix.EAGAIN || err == unix.EINTR
}

// dial connects a new socket from local (port 0) to remote.
func dial(op *profile.Op, local netip.Addr, remote netip.AddrPort, wait waitFn) (*sock, error) {
	s, err := newSock(op.Proto, remote.Addr().Is6(), op)
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(s.fd, sockaddr(netip.AddrPortFrom(local, 0))); err != nil {
		s.close()
		return nil, fmt.Errorf("bind %v: %w", local, err)
	}
	err = unix.Connect(s.fd, sockaddr(remote))
	for err == unix.EINPROGRESS || err == unix.EALREADY || err == unix.EINTR {
		// SO_SNDTIMEO cut the handshake short: wait for it in slices.
		if werr := wait(); werr != nil {
			s.close()
			return nil, werr
		}
		fds := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLOUT}}
		n, perr := unix.Poll(fds, int(sliceTimeout/time.Millisecond))
		if perr != nil && perr != unix.EINTR {
			err = perr
			break
		}
		if n > 0 {
			soerr, gerr := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_ERROR)
			if gerr != nil {
				err = gerr
			} else if soerr != 0 {
				err = unix.Errno(soerr)
			} else {
				err = nil
			}
		}
	}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("connect %v: %w", remote, err)
	}
	return s, nil
}

// local returns the socket's own address.
func (s *sock) local() netip.AddrPort {
	sa, err := unix.Getsockname(s.fd)
	if err != nil {
		return netip.AddrPort{}
	}
	return addrPort(sa)
}

// listen binds a dual-stack socket to [::]:port (every address of the
// host, IPv4 and IPv6, primary and secondary network); TCP sockets listen.
func listen(proto profile.Proto, port int) (*sock, error) {
	s, err := newSock(proto, true, nil)
	if err != nil {
		return nil, err
	}
	if err := unix.SetsockoptInt(s.fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err != nil {
		s.close()
		return nil, err
	}
	if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		s.close()
		return nil, err
	}
	if err := unix.Bind(s.fd, &unix.SockaddrInet6{Port: port}); err != nil {
		s.close()
		return nil, fmt.Errorf("bind %s port %d: %w", proto, port, err)
	}
	if proto == profile.TCP {
		if err := unix.Listen(s.fd, 128); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// accept waits for one connection.
func (s *sock) accept(op *profile.Op, wait waitFn) (*sock, netip.AddrPort, error) {
	for {
		fd, sa, err := unix.Accept4(s.fd, unix.SOCK_CLOEXEC)
		if err == nil {
			c := &sock{fd: fd, proto: profile.TCP, v6: true}
			tv := unix.NsecToTimeval(sliceTimeout.Nanoseconds())
			for _, o := range []int{unix.SO_RCVTIMEO, unix.SO_SNDTIMEO} {
				if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, o, &tv); err != nil {
					c.close() // without sliced timeouts a read could block a run for good
					return nil, netip.AddrPort{}, fmt.Errorf("accept: timeouts: %w", err)
				}
			}
			if err := c.options(op); err != nil {
				c.close()
				return nil, netip.AddrPort{}, err
			}
			return c, addrPort(sa), nil
		}
		if !timedOut(err) {
			return nil, netip.AddrPort{}, fmt.Errorf("accept: %w", err)
		}
		if werr := wait(); werr != nil {
			return nil, netip.AddrPort{}, werr
		}
	}
}

// readFull reads exactly len(buf) bytes of a TCP stream. got is what it
// read before an error; first is called once when the first byte arrives.
func (s *sock) readFull(buf []byte, wait waitFn, first func() error) (got int, err error) {
	for got < len(buf) {
		var n int
		if len(s.pend) > 0 {
			n = copy(buf[got:], s.pend)
			s.pend = s.pend[n:]
		} else {
			n, err = unix.Read(s.fd, buf[got:])
		}
		switch {
		case n > 0:
			if got == 0 && first != nil {
				if ferr := first(); ferr != nil {
					if ferr == errPastEnd {
						s.pend = append(append([]byte(nil), buf[:n]...), s.pend...)
					}
					return got, ferr
				}
			}
			got += n
		case err == nil: // n == 0
			return got, errEOF
		case timedOut(err):
			if werr := wait(); werr != nil {
				return got, werr
			}
		default:
			return got, fmt.Errorf("read: %w", err)
		}
	}
	return got, nil
}

// writeAll writes all of buf to a TCP stream.
func (s *sock) writeAll(buf []byte, wait waitFn) (put int, err error) {
	for put < len(buf) {
		n, err := unix.Write(s.fd, buf[put:])
		if n > 0 {
			put += n
			continue
		}
		if timedOut(err) {
			if werr := wait(); werr != nil {
				return put, werr
			}
			continue
		}
		return put, fmt.Errorf("write: %w", err)
	}
	return put, nil
}

// send sends one datagram, to the connected peer (to invalid) or to to.
func (s *sock) send(buf []byte, to netip.AddrPort, wait waitFn) error {
	for {
		var err error
		if to.IsValid() {
			err = unix.Sendto(s.fd, buf, 0, sockaddr(netip.AddrPortFrom(mapped(to.Addr(), s.v6), to.Port())))
		} else {
			_, err = unix.Write(s.fd, buf)
		}
		if err == nil {
			return nil
		}
		if !timedOut(err) && err != unix.ENOBUFS {
			return fmt.Errorf("send: %w", err)
		}
		if werr := wait(); werr != nil {
			return werr
		}
	}
}

// recv receives one datagram within timeout (errLost after it).
func (s *sock) recv(buf []byte, timeout time.Duration, wait waitFn) (int, netip.AddrPort, error) {
	if s.pendDgm {
		s.pendDgm = false
		return copy(buf, s.pend), s.pendFrom, nil
	}
	start := time.Now()
	for {
		n, sa, err := unix.Recvfrom(s.fd, buf, 0)
		if err == nil {
			var from netip.AddrPort
			if sa != nil {
				from = addrPort(sa)
			}
			return n, from, nil
		}
		if !timedOut(err) {
			return 0, netip.AddrPort{}, fmt.Errorf("recv: %w", err)
		}
		if werr := wait(); werr != nil {
			return 0, netip.AddrPort{}, werr
		}
		if timeout > 0 && time.Since(start) >= timeout {
			return 0, netip.AddrPort{}, errLost
		}
	}
}

// shutdownWrite sends a TCP FIN.
func (s *sock) shutdownWrite() error { return unix.Shutdown(s.fd, unix.SHUT_WR) }

// tcpInfo returns the kernel's counters of a TCP socket.
func (s *sock) tcpInfo() (*tcpCounters, error) {
	ti, err := unix.GetsockoptTCPInfo(s.fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return nil, err
	}
	return &tcpCounters{State: ti.State, Options: ti.Options, SegsOut: ti.Segs_out, SegsIn: ti.Segs_in, TotalRetrans: ti.Total_retrans, BytesRetrans: ti.Bytes_retrans}, nil
}
