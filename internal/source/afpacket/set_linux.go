//go:build linux

package afpacket

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/source"
)

// ErrWoken is returned by Set.Next when Wake interrupted the wait, so the
// owner can look at its control messages.
var ErrWoken = errors.New("afpacket: woken")

// RingError is returned by Set.Next when one member's socket reports an
// error (for example ENETDOWN when its interface is deleted). The member
// stays in the set until the owner removes it.
type RingError struct {
	Source *Source
	Err    error
}

func (e *RingError) Error() string { return fmt.Sprintf("afpacket: %s: %v", e.Source.iface, e.Err) }

// Unwrap returns the socket error.
func (e *RingError) Unwrap() error { return e.Err }

// Set lets one goroutine read several rings (one per interface, each
// possibly a member of a fanout group) with one wait. Rings are drained a
// block at a time in turn, so a busy interface cannot starve a quiet one.
// Add, Remove, Next and Close belong to the owning goroutine; Wake may be
// called from any goroutine. Members' Stats may be read from any goroutine.
//
// The members and the wake eventfd sit in an epoll instance of the Set's
// own, which is itself registered with Go's netpoller: a waiting Next parks
// its goroutine instead of blocking its thread in poll(2). A thread blocked
// in a system call makes the runtime's sysmon take its P away and then poll
// every 20 µs for a millisecond after each wait: measured at a third of the
// capture's CPU at 150k packets/s (docs/benchmarks.md).
type Set struct {
	srcs   []*Source
	ep     int             // epoll instance: members' sockets and evfd
	epf    *os.File        // ep in the netpoller (non-blocking); Close closes ep
	rc     syscall.RawConn // epf's
	evs    []unix.EpollEvent
	peek   func(uintptr) bool // epollPeek into evs, nev and everr: made once, so a wait does not allocate
	nev    int
	everr  error
	evfd   int
	cur    int // member being drained
	closed bool
	woken  atomic.Bool
	wakeMu sync.Mutex // Wake and Close: no write to a closed (or reused) eventfd
	gone   bool       // guarded by wakeMu: evfd is closed
}

// NewSet returns an empty Set.
func NewSet() (*Set, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("afpacket: eventfd: %w", err)
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("afpacket: epoll_create1: %w", err)
	}
	s := &Set{evfd: fd, ep: ep, evs: make([]unix.EpollEvent, 8)}
	s.peek = func(uintptr) bool {
		s.nev, s.everr = epollPeek(s.ep, s.evs)
		return s.nev > 0 || s.everr != nil
	}
	fail := func(what string, err error) (*Set, error) {
		unix.Close(fd)
		if s.epf != nil {
			s.epf.Close()
		} else {
			unix.Close(ep)
		}
		return nil, fmt.Errorf("afpacket: %s: %w", what, err)
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
		return fail("epoll_ctl (eventfd)", err)
	}
	// Non-blocking before NewFile: that is what makes os.File use the netpoller.
	if err := unix.SetNonblock(ep, true); err != nil {
		return fail("set epoll non-blocking", err)
	}
	s.epf = os.NewFile(uintptr(ep), "afpacket-set")
	if s.rc, err = s.epf.SyscallConn(); err != nil {
		return fail("epoll in the netpoller", err)
	}
	return s, nil
}

// Add makes src a member; the Set owns it from now on (Remove or Close
// closes it), and src's own Next must no longer be called. If src cannot
// be watched (epoll_ctl fails: out of memory or watches) it is still a
// member, read whenever another member or Wake ends a wait, and the error
// says so.
func (s *Set) Add(src *Source) error {
	s.srcs = append(s.srcs, src)
	if len(s.evs) < len(s.srcs)+1 {
		s.evs = make([]unix.EpollEvent, 2*len(s.srcs)+1)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLERR, Fd: int32(src.fd)}
	if err := unix.EpollCtl(s.ep, unix.EPOLL_CTL_ADD, src.fd, &ev); err != nil {
		return fmt.Errorf("afpacket: watch %s: epoll_ctl: %w", src.iface, err)
	}
	return nil
}

// Remove closes src and drops it from the set. The last frame Next
// returned from src is invalid afterwards.
func (s *Set) Remove(src *Source) error {
	for i, m := range s.srcs {
		if m == src {
			s.srcs = append(s.srcs[:i], s.srcs[i+1:]...)
			if s.cur >= len(s.srcs) {
				s.cur = 0
			}
			_ = unix.EpollCtl(s.ep, unix.EPOLL_CTL_DEL, src.fd, nil) // closing would drop it too, unless the fd is shared
			return src.Close()
		}
	}
	return nil
}

// Sources returns the members (the slice is the Set's own: do not keep it
// across Add or Remove).
func (s *Set) Sources() []*Source { return s.srcs }

// Wake makes a waiting (or the next) Next return ErrWoken. Safe from any
// goroutine.
func (s *Set) Wake() {
	if s.woken.Swap(true) {
		return // already pending: one write is enough
	}
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	if !s.gone {
		var one = [8]byte{1}
		_, _ = unix.Write(s.evfd, one[:])
	}
}

// Next fills f with the next frame of any member and returns that member.
// It waits at most wait (negative: until a frame, Wake or an error) and
// returns os.ErrDeadlineExceeded when nothing came. f.Data points into the
// member's ring and stays valid until the next call to Next or Remove.
func (s *Set) Next(f *source.Frame, wait time.Duration) (*Source, error) {
	return s.next(f, wait)
}

// NextBlock is Next a block at a time: it returns a member holding a
// ring block with frames left, for the caller to walk (Source.walk) before
// calling NextBlock or Next again; the next call hands the block back. It
// waits as Next does and returns the same errors.
func (s *Set) NextBlock(wait time.Duration) (*Source, error) {
	return s.next(nil, wait)
}

// next is Next with a frame to fill, NextBlock without (a flag, not a
// func value: no closure per call).
func (s *Set) next(f *source.Frame, wait time.Duration) (*Source, error) {
	var deadline time.Time
	for {
		if s.closed {
			return nil, source.ErrStopped
		}
		if s.woken.Load() {
			s.drainWake()
			return nil, ErrWoken
		}
		var m *Source
		if f != nil {
			m = s.scan(f)
		} else {
			m = s.block()
		}
		if m != nil {
			return m, nil
		}
		if len(s.srcs) > 0 && ((f != nil && s.srcs[s.cur].left > 0) || (f == nil && s.srcs[s.cur].held)) {
			continue // only skipped frames so far, or an empty block just taken (handed back next): no poll yet
		}
		if wait >= 0 {
			if deadline.IsZero() {
				deadline = time.Now().Add(wait)
			} else if !time.Now().Before(deadline) {
				return nil, os.ErrDeadlineExceeded
			}
		}
		if err := s.poll(deadline); err != nil {
			return nil, err
		}
	}
}

// block is scan a block at a time: it looks at each member at most once
// (plus a return to the first) for a block with frames left, handing
// finished blocks back on the way.
func (s *Set) block() *Source {
	if len(s.srcs) == 0 {
		return nil
	}
	for range len(s.srcs) + 1 {
		m := s.srcs[s.cur]
		switch {
		case m.left > 0:
			return m
		case m.held:
			m.handBack() // walked: next member's turn
			s.advance()
		case !m.acquire():
			s.advance()
		case m.left > 0:
			return m // an empty block (none so far) is handed back on the next turn
		}
	}
	return nil
}

// scan looks at each member at most once (plus a return to the first) for
// a frame, handing finished blocks back on the way.
func (s *Set) scan(f *source.Frame) *Source {
	if len(s.srcs) == 0 {
		return nil
	}
	for range len(s.srcs) + 1 {
		m := s.srcs[s.cur]
		switch {
		case m.left > 0:
			if m.frame(f) {
				return m
			}
			// a skipped or corrupt frame: same member again
		case m.held:
			m.handBack() // the caller is done with this block: next member's turn
			s.advance()
		case !m.acquire():
			s.advance()
		}
	}
	return nil
}

func (s *Set) advance() {
	if s.cur++; s.cur >= len(s.srcs) {
		s.cur = 0
	}
}

// poll waits until any member or the wake eventfd is ready, or until
// deadline (zero: no deadline), with the goroutine parked in the
// netpoller; it reports a member's socket error as a *RingError.
func (s *Set) poll(deadline time.Time) error {
	if err := s.epf.SetReadDeadline(deadline); err != nil {
		return fmt.Errorf("afpacket: set wait deadline: %w", err)
	}
	err := s.rc.Read(s.peek)
	n, werr := s.nev, s.everr
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil // Next looks once more, then reports the deadline
	case err != nil:
		return fmt.Errorf("afpacket: wait: %w", err)
	case werr != nil:
		return fmt.Errorf("afpacket: epoll_wait: %w", werr)
	}
	for _, ev := range s.evs[:n] {
		if ev.Events&(unix.EPOLLERR|unix.EPOLLHUP) == 0 || ev.Fd == int32(s.evfd) {
			continue
		}
		for _, m := range s.srcs {
			if int32(m.fd) != ev.Fd {
				continue
			}
			if e, err := unix.GetsockoptInt(m.fd, unix.SOL_SOCKET, unix.SO_ERROR); err == nil && e != 0 {
				return &RingError{Source: m, Err: unix.Errno(e)}
			}
		}
	}
	return nil
}

// epollPeek is epoll_wait with a zero timeout. It never blocks, so it is
// made as a raw system call: an ordinary one (entersyscall) would wake the
// runtime's sysmon from its deep sleep at every ring block, and sysmon then
// polls every 20 µs for a millisecond.
func epollPeek(ep int, evs []unix.EpollEvent) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(ep), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), 0, 0, 0)
	switch {
	case e == unix.EINTR:
		return 0, nil
	case e != 0:
		return 0, e
	}
	return int(r), nil
}

func (s *Set) drainWake() {
	var b [8]byte
	_, _ = unix.Read(s.evfd, b[:]) // reset the eventfd counter
	s.woken.Store(false)
}

// Close closes every member and the Set.
func (s *Set) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, m := range s.srcs {
		errs = append(errs, m.Close())
	}
	s.srcs = nil
	errs = append(errs, s.epf.Close())
	s.wakeMu.Lock()
	s.gone = true
	errs = append(errs, unix.Close(s.evfd))
	s.wakeMu.Unlock()
	return errors.Join(errs...)
}

// Closed reports whether Close has been called.
func (s *Source) Closed() bool { return s.closed.Load() }

// Iface returns the name of the interface the source is bound to.
func (s *Source) Iface() string { return s.iface }
