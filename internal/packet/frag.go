package packet

import "encoding/binary"

// fragProbe is the probe window: a key lives in one of fragProbe slots
// after its hash, so lookups touch at most one or two cache lines.
const fragProbe = 4

// maxFragmentSlots caps Config.FragmentSlots (64 bytes a slot: 64 MiB).
const maxFragmentSlots = 1 << 20

// fragMeta packs the rest of a datagram's identity next to its addresses:
// the ID (IPv4 Identification or IPv6 fragment ID), the protocol (IPv4
// protocol or the IPv6 Fragment header's Next Header) and the IP version.
// One word compares faster than three fields.
func fragMeta(id uint32, proto, ver uint8) uint64 {
	return uint64(id) | uint64(proto)<<32 | uint64(ver)<<40
}

// fragEntry remembers what a first fragment said about its transport.
type fragEntry struct {
	src, dst           [16]byte
	meta               uint64 // fragMeta
	expires            int64  // packet time (Unix ns) after which the entry is dead
	sport, dport       uint16
	tproto             uint8 // transport protocol (IPv6: after any headers that follow the Fragment header)
	icmpType, icmpCode uint8
	used               bool
	_                  [8]byte // pad to 64 bytes: index by shift, one cache line per slot
}

// fragTable is a fixed-size open-addressing table of first fragments.
// It never allocates after newFragTable: full windows overwrite their
// oldest entry, and expiry is lazy (an expired slot counts as free).
type fragTable struct {
	slots   []fragEntry
	mask    uint64
	timeout int64
}

func newFragTable(slots int, timeout int64) fragTable {
	n := fragProbe
	for n < slots && n < maxFragmentSlots {
		n <<= 1
	}
	return fragTable{slots: make([]fragEntry, n), mask: uint64(n - 1), timeout: timeout}
}

// fragHash mixes a datagram's identity; a multiply-xorshift is plenty for
// a table whose keys an attacker can only fill, not grow.
func fragHash(src, dst *[16]byte, meta uint64) uint64 {
	le := binary.LittleEndian
	h := le.Uint64(src[:8]) ^ le.Uint64(src[8:])*0x9e3779b97f4a7c15
	h ^= (le.Uint64(dst[:8]) ^ le.Uint64(dst[8:])*0xc2b2ae3d27d4eb4f) >> 1
	h = (h ^ meta) * 0xff51afd7ed558ccd
	return h ^ h>>29
}

// lookup returns the live entry for the datagram, or nil.
func (t *fragTable) lookup(src, dst *[16]byte, meta uint64, now int64) *fragEntry {
	i := fragHash(src, dst, meta)
	for j := uint64(0); j < fragProbe; j++ {
		e := &t.slots[(i+j)&t.mask]
		if e.used && e.meta == meta && e.src == *src && e.dst == *dst && now <= e.expires {
			return e
		}
	}
	return nil
}

// insert returns the slot for the datagram: its existing entry, else a free
// or expired one, else the window's oldest entry (evicted reports that case).
func (t *fragTable) insert(src, dst *[16]byte, meta uint64, now int64) (e *fragEntry, evicted bool) {
	i := fragHash(src, dst, meta)
	var free, oldest *fragEntry
	for j := uint64(0); j < fragProbe; j++ {
		s := &t.slots[(i+j)&t.mask]
		if !s.used || now > s.expires {
			if free == nil {
				free = s
			}
			continue
		}
		if s.meta == meta && s.src == *src && s.dst == *dst {
			free = s
			break
		}
		if oldest == nil || s.expires < oldest.expires {
			oldest = s
		}
	}
	if free == nil {
		free, evicted = oldest, true
	}
	free.src, free.dst, free.meta = *src, *dst, meta
	free.expires = now + t.timeout
	free.used = true
	return free, evicted
}
