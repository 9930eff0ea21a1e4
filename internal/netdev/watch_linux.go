//go:build linux

package netdev

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// watchRcvBuf is the subscription socket's receive buffer: room for
// thousands of link notifications before the kernel drops some (ENOBUFS).
const watchRcvBuf = 4 << 20

// errZero is returned by the methods of a Watcher not made by Watch.
var errZero = errors.New("netdev: Watcher not made by Watch")

// Watcher reports link changes of one network namespace: the one of the
// thread that called Watch. Next belongs to one goroutine at a time (calls
// are serialised); Close, Stats, Initial and List may be called from any
// goroutine.
type Watcher struct {
	fd      int // subscription socket (RTNLGRP_LINK); owned by Next, closed by Close under nextMu
	evfd    int // eventfd Close writes to wake a Next blocked in poll
	dump    *dumper
	initial []Link

	closed atomic.Bool
	nextMu sync.Mutex // held by Next for its whole run: Close takes it before closing fd and evfd, so Next never touches a closed (or reused) descriptor
	listMu sync.Mutex // serialises List on the dump socket; Close takes it before closing it
	pfds   [2]unix.PollFd
	buf    []byte // receive buffer; nil only in a Watcher not made by Watch
	pend   []byte // unread messages of the last datagram
	c      counters
}

// Watch subscribes to link notifications (RTNLGRP_LINK) in the calling
// thread's network namespace and then takes the initial list of links
// (Initial).
//
// The order matters: had the list been taken first, a link created between
// the dump and the subscription would never be reported. Subscribing first
// means every change after the subscription is queued on the socket; the
// price is that changes made between the subscription and the dump are
// both in Initial and, later, in Next's events (a NEWLINK for a link
// already listed, a DELLINK for a link that was never listed). Applying
// events in order as upserts and deletes by Index, and ignoring deletes of
// unknown links, converges on the true state.
func Watch() (*Watcher, error) { return watch(watchRcvBuf) }

// watch is Watch with the receive buffer size as a parameter (tests use a
// tiny one to provoke overruns).
func watch(rcvbuf int) (*Watcher, error) {
	fd, err := openRoute()
	if err != nil {
		return nil, err
	}
	w := &Watcher{fd: fd, evfd: -1}
	fail := func(err error) (*Watcher, error) {
		unix.Close(w.fd)
		if w.evfd >= 0 {
			unix.Close(w.evfd)
		}
		if w.dump != nil {
			_ = w.dump.close() // the Watch error is the one to report
		}
		return nil, err
	}
	// SO_RCVBUFFORCE may exceed net.core.rmem_max but needs CAP_NET_ADMIN;
	// without it SO_RCVBUF gives what rmem_max allows.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf) != nil {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf); err != nil {
			return fail(fmt.Errorf("netdev: SO_RCVBUF: %w", err))
		}
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, unix.RTNLGRP_LINK); err != nil {
		return fail(fmt.Errorf("netdev: joining RTNLGRP_LINK: %w", err))
	}
	if w.evfd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return fail(fmt.Errorf("netdev: eventfd: %w", err))
	}
	// The dump socket is opened now, on this thread, so that List after an
	// overrun lists this namespace whatever thread calls it.
	if w.dump, err = newDumper(); err != nil {
		return fail(err)
	}
	if w.initial, err = w.dump.list(&w.c, nil); err != nil {
		return fail(err)
	}
	w.pfds = [2]unix.PollFd{
		{Fd: int32(w.fd), Events: unix.POLLIN},
		{Fd: int32(w.evfd), Events: unix.POLLIN},
	}
	w.buf = make([]byte, recvBufSize)
	return w, nil
}

// Initial returns the links present right after Watch subscribed, sorted
// by Index. The slice is the caller's.
func (w *Watcher) Initial() []Link { return slices.Clone(w.initial) }

// List dumps the links of the watcher's namespace again (after ErrOverrun,
// for instance), sorted by Index. It counts into the watcher's Stats.
func (w *Watcher) List() ([]Link, error) {
	if w.buf == nil {
		return nil, errZero
	}
	w.listMu.Lock()
	defer w.listMu.Unlock()
	if w.closed.Load() {
		return nil, ErrClosed
	}
	return w.dump.list(&w.c, nil)
}

// Next blocks until the next link event and returns it. Messages that are
// not link events are skipped; malformed ones are skipped and counted. It
// returns ErrOverrun when the kernel dropped notifications (call List and
// reconcile; the Watcher keeps working) and ErrClosed once Close was called,
// including when Close interrupts a blocked Next.
func (w *Watcher) Next() (Event, error) {
	if w.buf == nil {
		return Event{}, errZero
	}
	w.nextMu.Lock()
	defer w.nextMu.Unlock()
	for {
		if w.closed.Load() {
			return Event{}, ErrClosed
		}
		for len(w.pend) > 0 {
			ev, res, rest := nextEvent(w.pend, &w.c)
			w.pend = rest
			if res == resEvent {
				w.c.events.Add(1)
				return ev, nil
			}
		}
		if err := w.recv(); err != nil {
			return Event{}, err
		}
	}
}

// recv waits for the socket or Close and reads one datagram into pend.
func (w *Watcher) recv() error {
	w.pfds[0].Revents, w.pfds[1].Revents = 0, 0
	if _, err := unix.Poll(w.pfds[:], -1); err != nil && err != unix.EINTR {
		return fmt.Errorf("netdev: poll: %w", err)
	}
	if w.closed.Load() || w.pfds[1].Revents != 0 {
		return ErrClosed // only Close writes the eventfd
	}
	if w.pfds[0].Revents == 0 {
		return nil // EINTR: poll again
	}
	n, from, err := unix.Recvfrom(w.fd, w.buf, unix.MSG_DONTWAIT|unix.MSG_TRUNC)
	switch {
	case err == unix.ENOBUFS:
		w.c.overruns.Add(1)
		return ErrOverrun
	case err == unix.EAGAIN || err == unix.EWOULDBLOCK || err == unix.EINTR:
		return nil
	case err != nil:
		return fmt.Errorf("netdev: reading link notifications: %w", err)
	}
	if nl, ok := from.(*unix.SockaddrNetlink); !ok || nl.Pid != 0 {
		w.c.malformed(ReasonForeign)
		return nil
	}
	if n > len(w.buf) {
		// MSG_TRUNC returned the real size: the tail of the datagram is lost,
		// and with it at least one event. Say so like an overrun.
		w.c.malformed(ReasonTruncated)
		w.c.overruns.Add(1)
		return ErrOverrun
	}
	w.pend = w.buf[:n]
	return nil
}

// Stats returns the watcher's counters; safe from any goroutine, also
// after Close.
func (w *Watcher) Stats() Stats { return w.c.snapshot() }

// Close wakes a blocked Next (which returns ErrClosed), waits for it and
// for a List in progress to finish, and closes the sockets. Close is
// idempotent and safe from any goroutine.
func (w *Watcher) Close() error {
	if w.buf == nil {
		return errZero // never closes descriptor 0 of a zero Watcher
	}
	if w.closed.Swap(true) {
		return nil
	}
	// evfd is still open: only this call (the first) closes it, below.
	var one = [8]byte{1} // eventfd counter increment (native endian; any nonzero value wakes poll)
	_, _ = unix.Write(w.evfd, one[:])
	w.nextMu.Lock()
	defer w.nextMu.Unlock()
	w.listMu.Lock()
	defer w.listMu.Unlock()
	w.pend = nil
	return errors.Join(unix.Close(w.fd), unix.Close(w.evfd), w.dump.close())
}
