package ipfix

import (
	"encoding/binary"
	"errors"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdr is the kernel's struct mmsghdr (Go pads it as C does).
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
}

// entry is one datagram of a sendmmsg: messages [first, end) of the
// batch, back to back in its buffer; more than one is a UDP_SEGMENT run.
type entry struct {
	first, end int
	seg        int // segment size (the run's first message), 0: one datagram
}

type udpSys struct {
	noGSO bool   // the kernel or the route refused UDP_SEGMENT: plain datagrams from now on
	runs  uint64 // UDP_SEGMENT datagrams sent (for tests)
	rc    syscall.RawConn
	ents  []entry
	hdrs  []mmsghdr
	iovs  []unix.Iovec
	oob   []byte
	// The state of one sendmmsg attempt, for try (made once: no allocation per send).
	k, n  int
	errno error
	try   func(fd uintptr) bool
}

var cmsgSpace = unix.CmsgSpace(2)

// send sends the messages in order with as few system calls as it can:
// one sendmmsg per batch, each run of equal-sized messages (the last one
// may be shorter) as one UDP_SEGMENT datagram the kernel splits. If the
// kernel or the route refuses segmentation (EINVAL, EIO: no checksum
// offload, ENOPROTOOPT, EOPNOTSUPP), it falls back to a datagram per
// message for good. done is called for every message, in order, with its
// result.
func (b *udpBatch) send(done func(i int, err error)) {
	s := &b.sys
	if s.rc == nil {
		rc, err := b.conn.SyscallConn()
		if err != nil {
			for i := range b.len() {
				done(i, err)
			}
			return
		}
		s.rc = rc
		s.try = func(fd uintptr) bool {
			b.calls++
			r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&s.hdrs[s.k])), uintptr(len(s.hdrs)-s.k), 0, 0, 0)
			s.n, s.errno = int(r), nil
			if e != 0 {
				s.n, s.errno = 0, e
			}
			return e != unix.EAGAIN // EAGAIN: wait in the netpoller until the socket can take more
		}
	}
	b.plan(0)
	retried := false
	for s.k < len(s.hdrs) {
		err := s.rc.Write(s.try)
		if err == nil {
			err = s.errno
		}
		if err == nil {
			for _, e := range s.ents[s.k : s.k+s.n] {
				if e.seg > 0 {
					s.runs++
				}
				for i := e.first; i < e.end; i++ {
					done(i, nil)
				}
			}
			s.k += s.n
			retried = false
			continue
		}
		e := s.ents[s.k]
		switch {
		case e.seg > 0 && !s.noGSO && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EIO) ||
			errors.Is(err, unix.ENOPROTOOPT) || errors.Is(err, unix.EOPNOTSUPP)):
			s.noGSO = true
			b.plan(e.first) // nothing of this entry was sent: again, one datagram per message
			continue
		case errors.Is(err, unix.ECONNREFUSED) && !retried:
			// An earlier datagram's ICMP error, reported (and cleared) on
			// this send, which did not go: once more.
			retried = true
			continue
		}
		retried = false
		for i := e.first; i < e.end; i++ {
			done(i, err)
		}
		s.k++
	}
}

// plan lays out the sendmmsg entries of messages from first on.
func (b *udpBatch) plan(first int) {
	s := &b.sys
	s.ents, s.k = s.ents[:0], 0
	for i := first; i < b.len(); {
		e := entry{first: i, end: i + 1}
		if size := len(b.msg(i)); !s.noGSO {
			total := size
			for e.end < b.len() && e.end-i < gsoSegments {
				n := len(b.msg(e.end))
				if n > size || total+n > gsoBytes {
					break
				}
				total += n
				e.end++
				if n < size { // a shorter segment can only be the last
					break
				}
			}
			if e.end-i > 1 {
				e.seg = size
			}
		}
		s.ents = append(s.ents, e)
		i = e.end
	}
	n := len(s.ents)
	if cap(s.hdrs) < n {
		s.hdrs, s.iovs, s.oob = make([]mmsghdr, n), make([]unix.Iovec, n), make([]byte, n*cmsgSpace)
	}
	s.hdrs, s.iovs = s.hdrs[:n], s.iovs[:n]
	clear(s.hdrs)
	for j, e := range s.ents {
		start := 0
		if e.first > 0 {
			start = b.ends[e.first-1]
		}
		iov := &s.iovs[j]
		iov.Base = &b.buf[start]
		iov.SetLen(b.ends[e.end-1] - start)
		h := &s.hdrs[j].hdr
		h.Iov, h.Iovlen = iov, 1
		if e.seg > 0 {
			oob := s.oob[j*cmsgSpace : (j+1)*cmsgSpace]
			cm := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
			cm.Level, cm.Type = unix.SOL_UDP, unix.UDP_SEGMENT
			cm.SetLen(unix.CmsgLen(2))
			binary.NativeEndian.PutUint16(oob[unix.CmsgLen(0):], uint16(e.seg))
			h.Control = &oob[0]
			h.SetControllen(cmsgSpace)
		}
	}
}
