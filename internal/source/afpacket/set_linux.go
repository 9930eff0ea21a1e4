//go:build linux

package afpacket

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

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
// possibly a member of a fanout group) with one poll. Rings are drained a
// block at a time in turn, so a busy interface cannot starve a quiet one.
// Add, Remove, Next and Close belong to the owning goroutine; Wake may be
// called from any goroutine. Members' Stats may be read from any goroutine.
type Set struct {
	srcs   []*Source
	pfds   []unix.PollFd // one per member, then the wake eventfd
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
	return &Set{evfd: fd}, nil
}

// Add makes src a member; the Set owns it from now on (Remove or Close
// closes it), and src's own Next must no longer be called.
func (s *Set) Add(src *Source) {
	s.srcs = append(s.srcs, src)
	s.rebuild()
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
			s.rebuild()
			return src.Close()
		}
	}
	return nil
}

// Sources returns the members (the slice is the Set's own: do not keep it
// across Add or Remove).
func (s *Set) Sources() []*Source { return s.srcs }

func (s *Set) rebuild() {
	s.pfds = s.pfds[:0]
	for _, m := range s.srcs {
		s.pfds = append(s.pfds, unix.PollFd{Fd: int32(m.fd), Events: unix.POLLIN | unix.POLLERR})
	}
	s.pfds = append(s.pfds, unix.PollFd{Fd: int32(s.evfd), Events: unix.POLLIN})
}

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
	var deadline time.Time
	for {
		if s.closed {
			return nil, source.ErrStopped
		}
		if s.woken.Load() {
			s.drainWake()
			return nil, ErrWoken
		}
		if m := s.scan(f); m != nil {
			return m, nil
		}
		if len(s.srcs) > 0 && s.srcs[s.cur].left > 0 {
			continue // only skipped frames so far: keep walking before polling
		}
		ms := pollPeriod
		if wait >= 0 {
			if deadline.IsZero() {
				deadline = time.Now().Add(wait)
			}
			left := time.Until(deadline)
			if left <= 0 {
				return nil, os.ErrDeadlineExceeded
			}
			ms = min(int((left+time.Millisecond-1)/time.Millisecond), pollPeriod)
		}
		if err := s.poll(ms); err != nil {
			return nil, err
		}
	}
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

// poll waits for any member or the wake eventfd and reports a member's
// socket error as a *RingError.
func (s *Set) poll(ms int) error {
	for i := range s.pfds {
		s.pfds[i].Revents = 0
	}
	if _, err := unix.Poll(s.pfds, ms); err != nil && err != unix.EINTR {
		return fmt.Errorf("afpacket: poll: %w", err)
	}
	for i, m := range s.srcs {
		if s.pfds[i].Revents&(unix.POLLERR|unix.POLLNVAL|unix.POLLHUP) == 0 {
			continue
		}
		if e, err := unix.GetsockoptInt(m.fd, unix.SOL_SOCKET, unix.SO_ERROR); err == nil && e != 0 {
			return &RingError{Source: m, Err: unix.Errno(e)}
		}
		if s.pfds[i].Revents&unix.POLLNVAL != 0 {
			return &RingError{Source: m, Err: unix.EBADF}
		}
	}
	return nil
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
