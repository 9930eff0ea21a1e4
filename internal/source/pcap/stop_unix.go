//go:build unix

package pcap

import (
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// stopper lets Stop interrupt a read that blocks: standard input or a FIFO
// fed by a live capture (tcpdump -w - | weir capture --read -) can wait
// for data forever, and SIGTERM must still end the run.
type stopper struct {
	mu   sync.Mutex
	f    *os.File // the pollable file being read, if any
	done bool
}

func nop() error { return nil }

// watch returns what to read instead of r, and a function that undoes what
// watch did. A pipe, FIFO or socket is read through a non-blocking
// duplicate of its descriptor, which the runtime poller can interrupt; the
// descriptor's blocking mode (shared with whoever else holds it) is put
// back afterwards. Files and terminals are read as they are.
func (s *stopper) watch(r io.Reader) (io.Reader, func() error) {
	f, ok := r.(*os.File)
	if !ok {
		return r, nop
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return r, nop
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return r, nop
	}
	dup, flags := -1, 0
	_ = rc.Control(func(fd uintptr) { // a failure leaves dup < 0: no stopper, as below
		var err error
		if flags, err = unix.FcntlInt(fd, unix.F_GETFL, 0); err != nil {
			return
		}
		if d, err := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0); err == nil {
			dup = d
		}
	})
	if dup < 0 {
		return r, nop
	}
	wasNonblock := flags&unix.O_NONBLOCK != 0
	if err := syscall.SetNonblock(dup, true); err != nil {
		syscall.Close(dup)
		return r, nop
	}
	nf := os.NewFile(uintptr(dup), f.Name()) // non-blocking: the poller owns it
	s.mu.Lock()
	s.f = nf
	if s.done {
		nf.SetReadDeadline(time.Unix(1, 0))
	}
	s.mu.Unlock()
	return nf, func() error {
		s.mu.Lock()
		s.f = nil
		s.mu.Unlock()
		if rc, err := nf.SyscallConn(); err == nil && !wasNonblock {
			_ = rc.Control(func(fd uintptr) { _ = syscall.SetNonblock(int(fd), false) }) // best effort: give stdin back as it was
		}
		return nf.Close()
	}
}

// stop interrupts a blocked read and every later one.
func (s *stopper) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	if s.f != nil {
		s.f.SetReadDeadline(time.Unix(1, 0)) // in the past: reads return at once
	}
}

func (s *stopper) stopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}
