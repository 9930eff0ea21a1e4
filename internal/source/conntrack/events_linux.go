//go:build linux

package conntrack

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/nfnetlink"
)

// Multicast groups of ctnetlink events (enum nfnetlink_groups).
const (
	nfnlgrpConntrackNew     = 1
	nfnlgrpConntrackUpdate  = 2
	nfnlgrpConntrackDestroy = 3
)

// DefaultEventBuf is the default kernel receive buffer of an event socket:
// room for ~20k events of ~200 bytes, a burst of new connections between
// two reads. A burst larger than that overruns it (counted; the caller
// dumps the table to catch up).
const DefaultEventBuf = 4 << 20

// Events is a ctnetlink socket subscribed to the conntrack event groups
// (new, update, destroy). It is not safe for concurrent use.
type Events struct {
	fd   int
	buf  []byte
	dec  Decoder
	conn Conn

	messages  atomic.Uint64
	rejected  atomic.Uint64
	datagrams atomic.Uint64
	enobufs   atomic.Uint64
	eintr     atomic.Uint64
}

// EventsConfig configures an event socket.
type EventsConfig struct {
	// Netns, if set, runs fn inside the network namespace to watch.
	Netns func(fn func() error) error
	// RcvBuf is the kernel receive buffer (DefaultEventBuf if 0). Past
	// net.core.rmem_max it needs CAP_NET_ADMIN (SO_RCVBUFFORCE).
	RcvBuf int
}

// OpenEvents opens a socket subscribed to conntrack events.
func OpenEvents(cfg EventsConfig) (*Events, error) {
	fd, _, err := nfnetlink.Open(cfg.Netns, unix.NsecToTimeval(int64(time.Second)))
	if err != nil {
		return nil, fmt.Errorf("conntrack events: %w", err)
	}
	rb := cmp.Or(cfg.RcvBuf, DefaultEventBuf)
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rb) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rb) // capped at rmem_max
	}
	for _, g := range []int{nfnlgrpConntrackNew, nfnlgrpConntrackUpdate, nfnlgrpConntrackDestroy} {
		if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, g); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("conntrack events: join group %d: %w", g, err)
		}
	}
	// One event is one datagram of a few hundred bytes; 64 KiB holds any.
	return &Events{fd: fd, buf: make([]byte, 64<<10)}, nil
}

// Close closes the socket.
func (e *Events) Close() error { return unix.Close(e.fd) }

// Stats returns the socket's counters.
func (e *Events) Stats() EventStats {
	return EventStats{Messages: e.messages.Load(), Rejected: e.rejected.Load(), Datagrams: e.datagrams.Load(),
		ENOBUFS: e.enobufs.Load(), EINTR: e.eintr.Load()}
}

// Errors returns the decoder's rejected events per Reason.
func (e *Events) Errors() [NumReasons]uint64 { return e.dec.Errors }

// Wait blocks until events are queued or timeout passes; it reports
// whether events are ready.
func (e *Events) Wait(timeout time.Duration) (bool, error) {
	fds := [1]unix.PollFd{{Fd: int32(e.fd), Events: unix.POLLIN}}
	ms := int(timeout / time.Millisecond)
	for {
		n, err := unix.Poll(fds[:], ms)
		if err == unix.EINTR {
			e.eintr.Add(1)
			continue
		}
		if err != nil {
			return false, fmt.Errorf("conntrack events: poll: %w", err)
		}
		return n > 0, nil
	}
}

// Read hands every event queued now to fn, without blocking; c is reused
// for the next event. It returns the number of events read. When the
// kernel dropped events for lack of buffer it returns ErrOverrun after
// the events it could read: the caller should dump the table to catch up.
func (e *Events) Read(fn func(c *Conn)) (int, error) {
	n := 0
	for {
		size, _, errno := unix.Syscall6(unix.SYS_RECVFROM, uintptr(e.fd), uintptr(unsafe.Pointer(&e.buf[0])),
			uintptr(len(e.buf)), unix.MSG_TRUNC|unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0:
		case unix.EINTR:
			e.eintr.Add(1)
			continue
		case unix.EAGAIN:
			return n, nil
		case unix.ENOBUFS:
			e.enobufs.Add(1)
			return n, fmt.Errorf("%w: %w", ErrOverrun, errno)
		default:
			return n, fmt.Errorf("conntrack events: %w", errno)
		}
		if int(size) > len(e.buf) {
			e.rejected.Add(1)
			e.dec.Errors[ReasonLength]++
			continue
		}
		e.datagrams.Add(1)
		b := e.buf[:size]
		for len(b) > 0 {
			msg, rest, err := NextMessage(b)
			if err != nil {
				e.rejected.Add(1)
				e.dec.Errors[ReasonLength]++
				break
			}
			b = rest
			if t := binary.NativeEndian.Uint16(msg[nfnetlink.MsgTypeOff:]); t == nfnetlink.MsgNoop || t == nfnetlink.MsgDone {
				continue
			}
			if err := e.dec.Decode(&e.conn, msg); err != nil {
				e.rejected.Add(1)
				continue
			}
			e.messages.Add(1)
			n++
			fn(&e.conn)
		}
	}
}

// errOverrun reports whether err is an event or dump overrun.
func errOverrun(err error) bool { return errors.Is(err, ErrOverrun) }
