//go:build linux

package afpacket

import (
	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/source"
)

// taker receives the frames of a ring block walked by Source.walk.
type taker interface {
	// take uses f (whose Data points into the ring) before it returns
	// and leaves f unchanged.
	take(f *source.Frame)
}

// walk hands every frame left in the held block cur to t, in ring order.
// It reads exactly the frames Source.frame would, one call at a time, and
// counts the same corrupt headers (TestWalkMatchesFrame): it is that
// function's loop, with the walk state in registers, the block's bounds
// and f's per-socket fields set once per block, and no call chain back
// through Set.Next per frame. The block stays held: the Set hands it back.
func (s *Source) walk(f *source.Frame, t taker) {
	blk := s.ring[s.cur*s.blockSize:][:s.blockSize]
	off, left := s.off, s.left
	skipOut := s.skipOut
	f.Link, f.Iface = s.link, s.iface
	for left > 0 {
		if off < blkHdrLen || off > len(blk)-frHdrBytes {
			s.corrupt.Add(1)
			break
		}
		h := blk[off : off+frHdrBytes : off+frHdrBytes]
		next := int(ne.Uint32(h[frNextOff:]))
		snap := int(ne.Uint32(h[frSnaplen:]))
		start := off + int(ne.Uint16(h[frMac:]))
		if start < off+frHdrBytes-12 || snap < 0 || snap > len(blk)-start { // as frame: mac past tpacket3_hdr, data inside the block
			s.corrupt.Add(1)
			break
		}
		left--
		if left > 0 {
			if next < frHdrBytes {
				s.corrupt.Add(1) // would loop on the same frame; this one is still good
				left = 0
			} else {
				off += next
			}
		}
		if skipOut && h[frPktType] == pktOutgoing {
			continue
		}
		status := ne.Uint32(h[frStatus:])
		f.HasVLAN = status&unix.TP_STATUS_VLAN_VALID != 0
		f.VLAN = 0
		if f.HasVLAN {
			f.VLAN = uint16(ne.Uint32(h[frVlanTCI:]))
		}
		end := start + snap
		f.Data = blk[start:end:end] // capacity capped: the taker cannot scribble on the ring
		f.WireLen = int(ne.Uint32(h[frLen:]))
		f.Time = int64(ne.Uint32(h[frSec:]))*1e9 + int64(ne.Uint32(h[frNsec:]))
		t.take(f)
	}
	s.off, s.left = off, 0
}
