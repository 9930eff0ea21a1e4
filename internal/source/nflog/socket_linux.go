//go:build linux

package nflog

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

// Socket is an NFLOG netlink socket bound to one group. It is not safe
// for concurrent use; Close may be called once.
type Socket struct {
	fd    int
	group uint16
	seq   uint32
	buf   []byte
	req   [256]byte

	enobufs   atomic.Uint64
	eintr     atomic.Uint64
	datagrams atomic.Uint64
	messages  atomic.Uint64
	control   atomic.Uint64
}

// Stats are a Socket's counters.
type Stats struct {
	Datagrams uint64 // datagrams received
	Messages  uint64 // NFLOG packet messages handed over
	Control   uint64 // other messages (NLMSG_DONE ending a batch, ...), skipped
	ENOBUFS   uint64 // receive buffer overruns: the kernel dropped messages
	EINTR     uint64 // interrupted system calls, retried
}

// ErrOverrun is returned (wrapping unix.ENOBUFS) when the socket's receive
// buffer overflowed and the kernel dropped log messages; the socket stays
// usable.
var ErrOverrun = errors.New("nflog: netlink receive buffer overrun")

// ErrTimeout is returned (wrapping unix.EAGAIN) when no datagram arrived
// within Config.ReadTimeout; it lets the caller expire idle flows.
var ErrTimeout = errors.New("nflog: no message within the read timeout")

// Defaults of Config.
const (
	DefaultCopyRange   = 128       // bytes of each packet copied: IP and transport headers
	DefaultBufSize     = 256 << 10 // read buffer: holds the largest batch (NFULA_CFG_NLBUFSIZ ≤ 128 KiB)
	DefaultRcvBuf      = 4 << 20   // SO_RCVBUF(FORCE)
	DefaultReadTimeout = time.Second
)

// Config configures a Socket.
type Config struct {
	// Netns, if set, runs fn on a thread inside the network namespace whose
	// firewall logs (netdev.InNetns; tests use testhost.Host.Do). NFLOG
	// groups are per namespace.
	Netns func(fn func() error) error
	// Group is the NFLOG group (nft "log group N"). Only one socket per
	// namespace may bind a group (EBUSY otherwise).
	Group uint16
	// CopyRange is how many bytes of each packet, from its IP header, the
	// kernel copies (DefaultCopyRange if 0). Byte counts come from the IP
	// header, not from the copy.
	CopyRange uint32
	// QThresh and FlushTimeout batch messages in the kernel: it sends when
	// QThresh messages are queued or FlushTimeout (1/100 s resolution)
	// passed. 0 keeps the kernel defaults (100 messages; 1 s), so by
	// default a lone dropped packet reaches the reader up to 1 s late.
	QThresh      uint32
	FlushTimeout time.Duration
	// NLBufSize is the kernel's batch buffer size (0: kernel default, a page).
	NLBufSize uint32
	// RcvBuf is the socket receive buffer (DefaultRcvBuf if 0).
	RcvBuf int
	// BufSize is the read buffer (DefaultBufSize if 0).
	BufSize int
	// ReadTimeout bounds each Read (DefaultReadTimeout if 0).
	ReadTimeout time.Duration
	// BindPF sends PF_UNBIND and PF_BIND for AF_INET and AF_INET6, making
	// nfnetlink_log the namespace's default logger for rules that log
	// without naming a backend. Rules with a group ("log group N",
	// "-j NFLOG") do not need it, and it changes namespace-wide state, so it
	// is off by default.
	BindPF bool
}

// Open opens a NETLINK_NETFILTER socket, binds it to cfg.Group in
// copy-packet mode and asks the kernel to number messages (NFULA_SEQ) so
// that losses show as sequence gaps.
func Open(cfg Config) (*Socket, error) {
	s := &Socket{fd: -1, group: cfg.Group, buf: make([]byte, cmp.Or(cfg.BufSize, DefaultBufSize))}
	fd, _, err := nfnetlink.Open(cfg.Netns, unix.NsecToTimeval(cmp.Or(cfg.ReadTimeout, DefaultReadTimeout).Nanoseconds()))
	if err != nil {
		return nil, fmt.Errorf("nflog: %w", err)
	}
	s.fd = fd
	if err := s.setup(cfg); err != nil {
		unix.Close(s.fd)
		return nil, err
	}
	return s, nil
}

// setup binds the socket and configures the group.
func (s *Socket) setup(cfg Config) error {
	rb := cmp.Or(cfg.RcvBuf, DefaultRcvBuf)
	if unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rb) != nil {
		_ = unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rb) // capped by rmem_max
	}
	// NETLINK_NO_ENOBUFS stays unset: overruns must show.
	if cfg.BindPF {
		for _, pf := range []uint8{nfnetlink.FamilyInet, nfnetlink.FamilyInet6} {
			if err := s.config(pf, 0, func(b []byte) []byte { return nfnetlink.AppendAttr(b, nfulaCfgCmd, nfulnlCfgCmdPFUnbind) }); err != nil {
				return fmt.Errorf("nflog: PF_UNBIND %d: %w", pf, err)
			}
			if err := s.config(pf, 0, func(b []byte) []byte { return nfnetlink.AppendAttr(b, nfulaCfgCmd, nfulnlCfgCmdPFBind) }); err != nil {
				return fmt.Errorf("nflog: PF_BIND %d: %w", pf, err)
			}
		}
	}
	g := cfg.Group
	if err := s.config(nfnetlink.FamilyUnspec, g, func(b []byte) []byte { return nfnetlink.AppendAttr(b, nfulaCfgCmd, nfulnlCfgCmdBind) }); err != nil {
		return fmt.Errorf("nflog: bind group %d: %w", g, err)
	}
	cr := cmp.Or(cfg.CopyRange, DefaultCopyRange)
	mode := [6]byte{4: nfulnlCopyPacket}
	binary.BigEndian.PutUint32(mode[:], cr)
	err := s.config(nfnetlink.FamilyUnspec, g, func(b []byte) []byte {
		b = nfnetlink.AppendAttr(b, nfulaCfgMode, mode[:]...)
		b = nfnetlink.AppendAttr(b, nfulaCfgFlags, 0, nfulnlCfgFSeq)
		if cfg.QThresh > 0 {
			b = nfnetlink.AppendAttr(b, nfulaCfgQthresh, be32b(cfg.QThresh)...)
		}
		if cfg.FlushTimeout > 0 {
			b = nfnetlink.AppendAttr(b, nfulaCfgTimeout, be32b(uint32(max(cfg.FlushTimeout/(10*time.Millisecond), 1)))...)
		}
		if cfg.NLBufSize > 0 {
			b = nfnetlink.AppendAttr(b, nfulaCfgNlbufsz, be32b(cfg.NLBufSize)...)
		}
		return b
	})
	if err != nil {
		return fmt.Errorf("nflog: configure group %d: %w", g, err)
	}
	return nil
}

func be32b(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// config sends one NFULNL_MSG_CONFIG request and waits for its ack.
func (s *Socket) config(family uint8, group uint16, attrs func([]byte) []byte) error {
	s.seq++
	b := s.req[:nfnetlink.HdrLen]
	b = attrs(b)
	nfnetlink.PutHeader(b, nfnlSubsysULOG, nfulnlMsgConfig, nfnetlink.FlagRequest|nfnetlink.FlagAck, s.seq, family, group)
	for {
		if _, err := unix.Write(s.fd, b); err != unix.EINTR {
			if err != nil {
				return err
			}
			break
		}
		s.eintr.Add(1)
	}
	for range 64 { // log messages may arrive before the ack; bounded
		n, err := s.recv()
		if err != nil {
			return err
		}
		for m := s.buf[:n]; len(m) > 0; {
			msg, rest, err := NextMessage(m)
			if err != nil {
				break
			}
			m = rest
			if binary.NativeEndian.Uint16(msg[nfnetlink.MsgTypeOff:]) == nfnetlink.MsgError && binary.NativeEndian.Uint32(msg[nfnetlink.MsgSeqOff:]) == s.seq {
				e, ok := nfnetlink.Errno(msg)
				if !ok {
					return unix.EBADMSG
				}
				if e != 0 {
					return syscall.Errno(e)
				}
				return nil
			}
		}
	}
	return errors.New("nflog: no ack from the kernel")
}

// Close closes the socket; the kernel unbinds the group.
func (s *Socket) Close() error { return unix.Close(s.fd) }

// Stats returns the socket's counters.
func (s *Socket) Stats() Stats {
	return Stats{Datagrams: s.datagrams.Load(), Messages: s.messages.Load(), Control: s.control.Load(),
		ENOBUFS: s.enobufs.Load(), EINTR: s.eintr.Load()}
}

// Read waits for one datagram and calls fn with each NFLOG packet message
// in it (nlmsghdr included; valid only during the call). It returns
// ErrTimeout when nothing arrived within the read timeout and ErrOverrun
// when the kernel dropped messages (counted; keep reading). An error from
// fn stops the datagram and is returned.
func (s *Socket) Read(fn func(msg []byte) error) error {
	n, err := s.recv()
	if err != nil {
		return err
	}
	for b := s.buf[:n]; len(b) > 0; {
		msg, rest, err := NextMessage(b)
		if err != nil {
			return err
		}
		b = rest
		if !IsPacket(msg) {
			s.control.Add(1) // NLMSG_DONE after a batch, stray acks
			continue
		}
		s.messages.Add(1)
		if err := fn(msg); err != nil {
			return err
		}
	}
	return nil
}

// recv reads one datagram into s.buf with recvfrom(2) directly
// (unix.Recvfrom allocates a Sockaddr per call).
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
		return 0, fmt.Errorf("%w: %w", ErrTimeout, err)
	default:
		return 0, fmt.Errorf("nflog: %w", err)
	}
}
