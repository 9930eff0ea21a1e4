package pcap

import (
	"math/bits"

	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
)

// pcapng block types.
const (
	blockSHB = 0x0A0D0D0A // Section Header Block (a palindrome: readable in either byte order)
	blockIDB = 1          // Interface Description Block
	blockOPB = 2          // Packet Block (obsolete)
	blockSPB = 3          // Simple Packet Block
	blockEPB = 6          // Enhanced Packet Block

	byteOrderMagic = 0x1A2B3C4D
)

// pcapng option codes.
const (
	optEnd      = 0
	optIfName   = 2
	optTsresol  = 9
	optTsoffset = 14
)

// pcapng layout: offsets from the start of the block.
const (
	blockHdrLen  = 8  // type, total length
	trailerLen   = 4  // total length again
	shbFixedLen  = 16 // type, length, byte-order magic, major, minor
	shbMinLen    = 28 // + section length (8) + trailer
	idbFixedLen  = 16 // type, length, link type, reserved, snaplen
	idbMinLen    = 20
	pktFixedLen  = 28 // EPB/OPB: type, length, interface, ts high, ts low, captured len, original len
	pktMinLen    = 32
	spbFixedLen  = 12 // type, length, original len
	spbMinLen    = 16
	blockMinLen  = 12
	shbMagic     = 8
	shbMajor     = 12
	idbLink      = 8
	idbSnaplen   = 12
	pktIface     = 8
	pktTsHigh    = 12
	pktTsLow     = 16
	pktCapLen    = 20
	pktOrigLen   = 24
	spbOrigLen   = 8
	defaultResol = 6 // microseconds, when an interface has no if_tsresol
)

// iface is one Interface Description Block of the current section.
type iface struct {
	name    string // if_name, interned once per IDB ("" when absent)
	link    packet.LinkType
	snaplen uint32
	mul     uint64 // decimal resolution: ns = ts*mul/div, one of mul and div is 1
	div     uint64
	shift   uint8 // binary resolution: ns = ts*1e9 >> shift
	pow2    bool
	offset  int64 // if_tsoffset, in ns
}

// setResol applies an if_tsresol value: 10^-v, or 2^-(v&0x7f) with the high bit.
func (ifc *iface) setResol(v uint8) {
	if v&0x80 != 0 {
		ifc.pow2, ifc.shift = true, v&0x7f
		return
	}
	ifc.pow2 = false
	k := int(v)
	switch {
	case k <= 9:
		ifc.mul, ifc.div = pow10(9-k), 1
	case k <= 28: // 10^(k-9) still fits in a uint64
		ifc.mul, ifc.div = 1, pow10(k-9)
	default: // finer than 10^-28 s: any 64-bit count is under a nanosecond
		ifc.mul, ifc.div = 0, 1
	}
}

func pow10(n int) uint64 {
	p := uint64(1)
	for range n {
		p *= 10
	}
	return p
}

// nanos converts a timestamp in the interface's units to Unix ns.
// Out-of-range values wrap; they never panic.
func (ifc *iface) nanos(ts uint64) int64 {
	var v uint64
	if ifc.pow2 {
		// 128-bit product so that fine binary resolutions keep every bit.
		hi, lo := bits.Mul64(ts, 1e9)
		switch s := uint(ifc.shift); {
		case s == 0:
			v = lo
		case s < 64:
			v = lo>>s | hi<<(64-s)
		default:
			v = hi >> (s - 64)
		}
	} else {
		v = ts * ifc.mul / ifc.div
	}
	return int64(v) + ifc.offset
}

// readSHB parses a Section Header Block, which sets the byte order and
// starts a new, empty interface list.
func (r *Reader) readSHB() error {
	r.blockStart = r.off
	b, err := r.peek(shbFixedLen, false)
	if err != nil {
		return err
	}
	switch {
	case b[shbMagic] == 0x1A && b[shbMagic+1] == 0x2B && b[shbMagic+2] == 0x3C && b[shbMagic+3] == 0x4D:
		r.big = true
	case b[shbMagic] == 0x4D && b[shbMagic+1] == 0x3C && b[shbMagic+2] == 0x2B && b[shbMagic+3] == 0x1A:
		r.big = false
	default:
		return r.errAt(ErrBadMagic)
	}
	total, err := r.blockLen(b, shbMinLen)
	if err != nil {
		return err
	}
	if r.u16(b[shbMajor:]) != 1 {
		return r.errAt(ErrBadVersion)
	}
	r.consume(shbFixedLen)
	// Section length and options: nothing weir needs.
	if err := r.skip(total - shbFixedLen - trailerLen); err != nil {
		return err
	}
	if err := r.trailer(total); err != nil {
		return err
	}
	r.ifaces = r.ifaces[:0]
	r.stats.Sections++
	return nil
}

// blockLen validates the total length of the block whose header is b.
func (r *Reader) blockLen(b []byte, minLen int) (int, error) {
	total := r.u32(b[4:])
	if total%4 != 0 || total < uint32(minLen) {
		return 0, r.errAt(ErrBadBlock)
	}
	if total > MaxBlockLen {
		return 0, r.errAt(ErrBlockTooLarge)
	}
	return int(total), nil
}

// trailer checks the block's closing copy of its total length.
func (r *Reader) trailer(total int) error {
	b, err := r.peek(trailerLen, false)
	if err != nil {
		return err
	}
	if r.u32(b) != uint32(total) {
		return r.errAt(ErrBadBlock)
	}
	r.consume(trailerLen)
	return nil
}

// nextPcapng reads blocks until one holds a packet.
func (r *Reader) nextPcapng(f *source.Frame) error {
	for {
		r.blockStart = r.off
		h, err := r.peek(blockHdrLen, true)
		if err != nil {
			return err
		}
		typ := r.u32(h)
		if typ == blockSHB {
			if err := r.readSHB(); err != nil {
				return err
			}
			continue
		}
		var total int
		switch typ {
		case blockEPB, blockOPB:
			if total, err = r.blockLen(h, pktMinLen); err != nil {
				return err
			}
			return r.readPacketBlock(f, typ, total)
		case blockSPB:
			if total, err = r.blockLen(h, spbMinLen); err != nil {
				return err
			}
			return r.readSPB(f, total)
		case blockIDB:
			if total, err = r.blockLen(h, idbMinLen); err != nil {
				return err
			}
			if err := r.readIDB(total); err != nil {
				return err
			}
		default:
			if total, err = r.blockLen(h, blockMinLen); err != nil {
				return err
			}
			if err := r.skip(total - trailerLen); err != nil {
				return err
			}
			if err := r.trailer(total); err != nil {
				return err
			}
			r.countSkip(typ)
		}
	}
}

// countSkip counts a skipped block by type, in a map of bounded size.
func (r *Reader) countSkip(typ uint32) {
	n, ok := r.skipped[typ]
	if !ok && len(r.skipped) >= maxSkipTypes {
		r.stats.SkippedOther++
		return
	}
	if r.skipped == nil {
		r.skipped = make(map[uint32]uint64)
	}
	r.skipped[typ] = n + 1
}

// readIDB parses an Interface Description Block and its options.
func (r *Reader) readIDB(total int) error {
	b, err := r.peek(idbFixedLen, false)
	if err != nil {
		return err
	}
	if len(r.ifaces) >= MaxIfaces {
		return r.errAt(ErrTooManyInterfaces)
	}
	ifc := iface{link: packet.LinkType(r.u16(b[idbLink:])), snaplen: r.u32(b[idbSnaplen:])}
	ifc.setResol(defaultResol)
	r.consume(idbFixedLen)
	// Options are parsed as a stream: nothing is buffered but the few
	// small values we keep, so a 16 MiB options area costs no memory.
	rem := total - idbFixedLen - trailerLen
	for rem >= 4 {
		o, err := r.peek(4, false)
		if err != nil {
			return err
		}
		code, olen := r.u16(o), int(r.u16(o[2:]))
		r.consume(4)
		rem -= 4
		if code == optEnd {
			break
		}
		padded := (olen + 3) &^ 3
		if padded > rem {
			return r.errAt(ErrBadBlock)
		}
		switch {
		case code == optIfName && olen > 0:
			v, err := r.peek(min(olen, maxNameLen), false)
			if err != nil {
				return err
			}
			for len(v) > 0 && v[len(v)-1] == 0 { // some writers add a NUL terminator
				v = v[:len(v)-1]
			}
			ifc.name = string(v)
		case code == optTsresol && olen >= 1:
			v, err := r.peek(1, false)
			if err != nil {
				return err
			}
			ifc.setResol(v[0])
		case code == optTsoffset && olen == 8:
			v, err := r.peek(8, false)
			if err != nil {
				return err
			}
			secs := int64(r.u32(v))<<32 | int64(r.u32(v[4:]))
			if !r.big {
				secs = int64(r.u32(v[4:]))<<32 | int64(r.u32(v))
			}
			ifc.offset = secs * 1e9
		}
		if err := r.skip(padded); err != nil {
			return err
		}
		rem -= padded
	}
	if err := r.skip(rem); err != nil {
		return err
	}
	if err := r.trailer(total); err != nil {
		return err
	}
	r.ifaces = append(r.ifaces, ifc)
	r.stats.Interfaces++
	return nil
}

// readPacketBlock reads an Enhanced Packet Block or an obsolete Packet
// Block (same layout but a 16-bit interface ID followed by a drop count).
func (r *Reader) readPacketBlock(f *source.Frame, typ uint32, total int) error {
	h, err := r.peek(pktFixedLen, false)
	if err != nil {
		return err
	}
	_ = h[pktFixedLen-1]
	id := r.u32(h[pktIface:])
	if typ == blockOPB {
		id = uint32(r.u16(h[pktIface:]))
	}
	capLen := r.u32(h[pktCapLen:])
	if capLen > MaxPacketLen {
		return r.errAt(ErrBlockTooLarge)
	}
	if pktMinLen+int((capLen+3)&^3) > total {
		return r.errAt(ErrBadBlock)
	}
	if id >= uint32(len(r.ifaces)) {
		return r.errAt(ErrUnknownInterface)
	}
	ifc := &r.ifaces[id]
	ts := uint64(r.u32(h[pktTsHigh:]))<<32 | uint64(r.u32(h[pktTsLow:]))
	origLen := r.u32(h[pktOrigLen:])
	data, err := r.blockData(total, pktFixedLen, int(capLen))
	if err != nil {
		return err
	}
	r.lastTime = ifc.nanos(ts)
	r.fill(f, ifc, data, origLen)
	return nil
}

// readSPB reads a Simple Packet Block: interface 0, no timestamp (the
// previous packet's time is used), captured length implied by the block.
func (r *Reader) readSPB(f *source.Frame, total int) error {
	h, err := r.peek(spbFixedLen, false)
	if err != nil {
		return err
	}
	if len(r.ifaces) == 0 {
		return r.errAt(ErrUnknownInterface)
	}
	ifc := &r.ifaces[0]
	origLen := r.u32(h[spbOrigLen:])
	capLen := min(origLen, uint32(total-spbMinLen))
	if ifc.snaplen > 0 {
		capLen = min(capLen, ifc.snaplen)
	}
	if capLen > MaxPacketLen {
		return r.errAt(ErrBlockTooLarge)
	}
	data, err := r.blockData(total, spbFixedLen, int(capLen))
	if err != nil {
		return err
	}
	r.fill(f, ifc, data, origLen)
	return nil
}

// blockData reads the rest of a packet block: its fixed part (already
// decoded), capLen bytes of data, padding and options, and the trailer.
// Callers have checked fixed+capLen+trailerLen ≤ total.
func (r *Reader) blockData(total, fixed, capLen int) ([]byte, error) {
	if total <= bufSize {
		// The whole block fits in the bufio buffer: hand out a slice of it
		// (valid until the next read) instead of copying it into r.buf.
		blk, err := r.peek(total, false)
		if err != nil {
			return nil, err
		}
		if r.u32(blk[total-trailerLen:]) != uint32(total) {
			return nil, r.errAt(ErrBadBlock)
		}
		data := blk[fixed : fixed+capLen : fixed+capLen]
		r.consume(total)
		return data, nil
	}
	r.consume(fixed)
	data, err := r.readData(capLen)
	if err != nil {
		return nil, err
	}
	if err := r.skip(total - fixed - capLen - trailerLen); err != nil {
		return nil, err
	}
	if err := r.trailer(total); err != nil {
		return nil, err
	}
	return data, nil
}

func (r *Reader) fill(f *source.Frame, ifc *iface, data []byte, origLen uint32) {
	f.Data = data
	f.WireLen = int(origLen)
	f.Time = r.lastTime
	f.Link = ifc.link
	f.Iface = ifc.name
	if f.Iface == "" {
		f.Iface = r.DefaultIface
	}
}
