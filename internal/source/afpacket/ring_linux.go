//go:build linux

package afpacket

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/prefetch"
	"github.com/weir-dev/weir/internal/source"
)

// Offsets in the ring, from <linux/if_packet.h>.
const (
	// struct tpacket_block_desc: version, offset_to_priv, then tpacket_hdr_v1.
	blkStatus   = 8  // block_status
	blkNumPkts  = 12 // num_pkts
	blkFirstPkt = 16 // offset_to_first_pkt
	blkHdrLen   = 48 // sizeof(struct tpacket_block_desc)

	// struct tpacket3_hdr, followed (at TPACKET_ALIGN(48)) by struct sockaddr_ll.
	frNextOff  = 0
	frSec      = 4
	frNsec     = 8
	frSnaplen  = 12
	frLen      = 16
	frStatus   = 20
	frMac      = 24
	frVlanTCI  = 32
	frPktType  = 48 + 10 // sockaddr_ll.sll_pkttype
	frHdrBytes = 48 + 12 // bytes of header this package reads

	pktOutgoing = 4 // PACKET_OUTGOING
)

var ne = binary.NativeEndian // the ring is in the kernel's byte order

// Next fills f with the next frame, waiting as long as it takes. f.Data
// points into the ring and stays valid until the next call to Next,
// NextTimeout or Close. It returns source.ErrStopped after Close, and an
// error if the socket reports one (for example ENETDOWN when the interface
// goes away).
func (s *Source) Next(f *source.Frame) error { return s.next(f, -1) }

// NextTimeout is Next waiting at most d (0: do not wait); it returns
// os.ErrDeadlineExceeded if no frame arrived in time. Frames are handed to
// user space a block at a time, so a frame may wait up to RingConfig.Timeout
// in a partly filled block before it becomes visible.
func (s *Source) NextTimeout(f *source.Frame, d time.Duration) error {
	return s.next(f, max(d, 0))
}

// next implements Next (wait < 0: forever) and NextTimeout.
func (s *Source) next(f *source.Frame, wait time.Duration) error {
	s.mu.RLock() // Close cannot unmap the ring while we walk it
	defer s.mu.RUnlock()
	var deadline time.Time
	for {
		if s.closed.Load() {
			return source.ErrStopped
		}
		if s.left > 0 {
			if s.frame(f) {
				return nil
			}
			continue // skipped or corrupt frame
		}
		if s.held { // the caller is done with the last frame of this block
			s.handBack()
		}
		if s.acquire() {
			continue
		}
		ms := pollPeriod
		if wait >= 0 {
			if deadline.IsZero() {
				deadline = time.Now().Add(wait)
			}
			left := time.Until(deadline)
			if left <= 0 {
				return os.ErrDeadlineExceeded
			}
			ms = min(int((left+time.Millisecond-1)/time.Millisecond), pollPeriod)
		}
		if err := s.poll(ms); err != nil {
			return err
		}
	}
}

// poll waits up to ms milliseconds for the ring or the Close eventfd.
func (s *Source) poll(ms int) error {
	s.pfds[0].Revents, s.pfds[1].Revents = 0, 0
	_, err := unix.Poll(s.pfds[:], ms)
	if err != nil && err != unix.EINTR {
		return fmt.Errorf("afpacket: poll: %w", err)
	}
	if s.pfds[0].Revents&(unix.POLLERR|unix.POLLNVAL) != 0 && !s.closed.Load() {
		if e, gerr := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_ERROR); gerr == nil && e != 0 {
			return fmt.Errorf("afpacket: %s: %w", s.iface, unix.Errno(e))
		}
	}
	return nil
}

// status returns the block_status word of block i, for atomic access.
func (s *Source) status(i int) *uint32 {
	return (*uint32)(unsafe.Pointer(&s.ring[i*s.blockSize+blkStatus])) // 8-byte aligned: blocks are page aligned
}

// acquire takes block cur if the kernel has handed it to user space.
func (s *Source) acquire() bool {
	if atomic.LoadUint32(s.status(s.cur))&unix.TP_STATUS_USER == 0 { // atomic load orders the reads of the block after it
		return false
	}
	b := s.ring[s.cur*s.blockSize:][:blkHdrLen]
	s.held = true
	s.left = int(ne.Uint32(b[blkNumPkts:]))
	s.off = int(ne.Uint32(b[blkFirstPkt:]))
	return true
}

// handBack returns block cur to the kernel and moves to the next block.
func (s *Source) handBack() {
	atomic.StoreUint32(s.status(s.cur), unix.TP_STATUS_KERNEL) // full barrier: our reads are done before the kernel sees it
	s.held, s.left = false, 0
	if s.cur++; s.cur == s.numBlocks {
		s.cur = 0
	}
}

// frame fills f from the frame at s.off of block cur and advances. It
// returns false for a skipped frame, or when the header is inconsistent
// (then the rest of the block is abandoned and counted as Corrupt).
func (s *Source) frame(f *source.Frame) bool {
	blk := s.ring[s.cur*s.blockSize:][:s.blockSize]
	off := s.off
	if off < blkHdrLen || off > len(blk)-frHdrBytes {
		s.corrupt.Add(1)
		s.left = 0
		return false
	}
	h := blk[off : off+frHdrBytes]
	next := ne.Uint32(h[frNextOff:])
	snap := int(ne.Uint32(h[frSnaplen:]))
	start := off + int(ne.Uint16(h[frMac:]))
	if start < off+frHdrBytes-12 || snap < 0 || snap > len(blk)-start { // snap < 0: 32-bit int; mac is past tpacket3_hdr; data ends in the block
		s.corrupt.Add(1)
		s.left = 0
		return false
	}
	s.left--
	if s.left > 0 {
		if next < frHdrBytes {
			s.corrupt.Add(1) // would loop on the same frame
			s.left = 0
		} else {
			s.off = off + int(next)
			// The kernel wrote the next frames from another CPU: fetch
			// the next one and (frames are usually of one size) the one
			// after it while this one is decoded.
			p := uintptr(unsafe.Pointer(&blk[0])) + uintptr(s.off)
			prefetch.Pair(p, p+127)
			prefetch.Pair(p+uintptr(next), p+uintptr(next)+127)
		}
	}
	if s.skipOut && h[frPktType] == pktOutgoing {
		return false
	}
	status := ne.Uint32(h[frStatus:])
	f.HasVLAN = status&unix.TP_STATUS_VLAN_VALID != 0
	f.VLAN = 0
	if f.HasVLAN {
		f.VLAN = uint16(ne.Uint32(h[frVlanTCI:]))
	}
	end := start + snap
	f.Data = blk[start:end:end] // capacity capped: an append by the caller cannot scribble on the ring
	f.WireLen = int(ne.Uint32(h[frLen:]))
	f.Time = int64(ne.Uint32(h[frSec:]))*1e9 + int64(ne.Uint32(h[frNsec:]))
	f.Link = s.link
	f.Iface = s.iface
	return true
}
