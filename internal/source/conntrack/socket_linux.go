//go:build linux

package conntrack

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/nfnetlink"
)

// Socket is a ctnetlink socket that dumps the conntrack table. It is not
// safe for concurrent use; Close may be called once.
type Socket struct {
	fd   int
	pid  uint32 // our netlink port id (from getsockname)
	seq  uint32
	buf  []byte // receive buffer, reused for every datagram
	req  [nfnetlink.MsgHdrLen + nfnetlink.GenLen]byte
	dec  Decoder
	conn Conn

	// Counters, readable at any time through Stats.
	enobufs   atomic.Uint64
	eintr     atomic.Uint64
	messages  atomic.Uint64
	rejected  atomic.Uint64
	foreign   atomic.Uint64
	datagrams atomic.Uint64
}

// Stats are a Socket's counters.
type Stats struct {
	Messages  uint64 // conntrack messages decoded and handed over
	Rejected  uint64 // messages the decoder rejected (by reason: Socket.Errors)
	Foreign   uint64 // messages of another sequence or sender, skipped
	Datagrams uint64 // datagrams received
	ENOBUFS   uint64 // receive buffer overruns (the dump was incomplete)
	EINTR     uint64 // interrupted receives, retried
}

// ErrOverrun is returned (wrapping unix.ENOBUFS) when the socket's receive
// buffer overflowed: messages were lost and the dump must be repeated.
var ErrOverrun = errors.New("conntrack: netlink receive buffer overrun")

// DefaultBufSize is the receive buffer's default size; the kernel sends
// dump datagrams of at most a few pages, so this holds any of them.
const DefaultBufSize = 64 << 10

// MinBufSize is the smallest receive buffer Open accepts (smaller values
// are raised): it holds the kernel's smallest dump datagram.
const MinBufSize = 8 << 10

// Config configures a Socket. The zero value opens a socket in the
// caller's network namespace.
type Config struct {
	// Netns, if set, runs fn on a thread inside the network namespace to
	// read (netdev.InNetns; tests use testhost.Host.Do). The socket is
	// created there and stays bound to that namespace.
	Netns func(fn func() error) error
	// BufSize is the size of the receive buffer (DefaultBufSize if 0,
	// at least MinBufSize). The kernel sizes dump datagrams to the reader's
	// buffer, up to 32 KiB, but never below about a page; a datagram larger
	// than the buffer fails the dump rather than being cut.
	BufSize int
	// Timeout bounds the wait for each datagram (5 s if 0).
	Timeout time.Duration
}

// Open opens a NETLINK_NETFILTER socket for ctnetlink.
func Open(cfg Config) (*Socket, error) {
	s := &Socket{fd: -1, buf: make([]byte, max(cmp.Or(cfg.BufSize, DefaultBufSize), MinBufSize))}
	to := cfg.Timeout
	if to <= 0 {
		to = 5 * time.Second
	}
	// NETLINK_NO_ENOBUFS is left unset on purpose: overruns must show.
	fd, pid, err := nfnetlink.Open(cfg.Netns, unix.NsecToTimeval(to.Nanoseconds()))
	if err != nil {
		return nil, fmt.Errorf("conntrack: %w", err)
	}
	s.fd, s.pid = fd, pid
	return s, nil
}

// Close closes the socket.
func (s *Socket) Close() error { return unix.Close(s.fd) }

// Stats returns the socket's counters.
func (s *Socket) Stats() Stats {
	return Stats{
		Messages: s.messages.Load(), Rejected: s.rejected.Load(), Foreign: s.foreign.Load(),
		Datagrams: s.datagrams.Load(), ENOBUFS: s.enobufs.Load(), EINTR: s.eintr.Load(),
	}
}

// Errors returns the decoder's rejected messages per Reason.
func (s *Socket) Errors() [NumReasons]uint64 { return s.dec.Errors }

// Dump dumps the conntrack table of family (unix.AF_INET, unix.AF_INET6,
// or unix.AF_UNSPEC for both) and calls fn with each entry. c is reused for
// the next entry: copy what must outlive the call. Messages the decoder
// rejects are counted and skipped. An error from fn stops the dump (the
// rest of it is read and dropped so the socket stays usable) and is
// returned. After any other error the kernel may still hold the rest of
// the dump, and a new dump request on the socket fails with EBUSY: close
// the Socket and open another.
func (s *Socket) Dump(family uint8, fn func(c *Conn) error) error {
	return s.DumpRaw(family, func(msg []byte) error {
		if err := s.dec.Decode(&s.conn, msg); err != nil {
			s.rejected.Add(1)
			return nil
		}
		s.messages.Add(1)
		return fn(&s.conn)
	})
}

// DumpRaw is Dump handing over each undecoded netlink message (nlmsghdr
// included). msg is only valid during the call.
func (s *Socket) DumpRaw(family uint8, fn func(msg []byte) error) error {
	s.seq++
	seq := s.seq
	r := s.req[:]
	nfnetlink.PutHeader(r, nfnlSubsysCtnetlink, ipctnlMsgCtGet, nfnetlink.FlagRequest|nfnetlink.FlagDump, seq, family, 0)
	if err := s.send(r); err != nil {
		return err
	}
	var fnErr error
	for {
		n, err := s.recv()
		if err != nil {
			return err
		}
		b := s.buf[:n]
		for len(b) > 0 {
			msg, rest, err := NextMessage(b)
			if err != nil {
				s.rejected.Add(1)
				s.dec.Errors[ReasonLength]++
				break // the rest of the datagram cannot be framed
			}
			b = rest
			if binary.NativeEndian.Uint32(msg[nfnetlink.MsgSeqOff:]) != seq {
				s.foreign.Add(1)
				continue
			}
			switch binary.NativeEndian.Uint16(msg[nfnetlink.MsgTypeOff:]) {
			case nfnetlink.MsgDone:
				return fnErr
			case nfnetlink.MsgError:
				if e := errnoOf(msg); e != 0 {
					return fmt.Errorf("conntrack: dump: %w", e)
				}
				return fnErr // an ack
			case nfnetlink.MsgNoop:
				continue
			case nfnetlink.MsgOverrun:
				s.enobufs.Add(1)
				return fmt.Errorf("%w: %w", ErrOverrun, unix.ENOBUFS)
			}
			if fnErr == nil {
				fnErr = fn(msg)
			}
		}
	}
}

// errnoOf returns the errno of an NLMSG_ERROR message (0 for an ack).
func errnoOf(msg []byte) syscall.Errno {
	e, ok := nfnetlink.Errno(msg)
	if !ok {
		return unix.EBADMSG
	}
	return syscall.Errno(e)
}

// send writes a request to the kernel. write(2) on an unconnected netlink
// socket goes to port id 0, the kernel, and unlike Sendto allocates no
// Sockaddr.
func (s *Socket) send(req []byte) error {
	for {
		_, err := unix.Write(s.fd, req)
		if err == unix.EINTR {
			s.eintr.Add(1)
			continue
		}
		if err != nil {
			return fmt.Errorf("conntrack: netlink send: %w", err)
		}
		return nil
	}
}

// recv reads one datagram into s.buf. It uses recvfrom directly because
// unix.Recvfrom allocates a Sockaddr per call; MSG_TRUNC makes the kernel
// return the datagram's full length, so a too small buffer shows.
func (s *Socket) recv() (int, error) {
	n, err := nfnetlink.Recv(s.fd, s.buf, &s.eintr)
	switch {
	case err == nil:
		s.datagrams.Add(1)
		return n, nil
	case errors.Is(err, unix.ENOBUFS):
		s.enobufs.Add(1)
		return 0, fmt.Errorf("%w: %w", ErrOverrun, err)
	case errors.Is(err, unix.EAGAIN):
		return 0, fmt.Errorf("conntrack: netlink receive timed out: %w", err)
	default:
		return 0, fmt.Errorf("conntrack: %w", err)
	}
}
