package pcap

import (
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
)

// Classic pcap magic numbers, as read in big-endian order.
const (
	magicMicro        = 0xa1b2c3d4 // microsecond timestamps
	magicNano         = 0xa1b23c4d // nanosecond timestamps
	magicMicroSwapped = 0xd4c3b2a1
	magicNanoSwapped  = 0x4d3cb2a1
)

// Classic pcap layout.
const (
	fileHeaderLen = 24
	recordHdrLen  = 16

	fhVersionMajor = 4
	fhSnaplen      = 16
	fhLinkType     = 20

	rhSec     = 0
	rhFrac    = 4 // microseconds or nanoseconds
	rhCapLen  = 8
	rhOrigLen = 12
)

// readFileHeader parses the 24-byte classic pcap file header.
func (r *Reader) readFileHeader() error {
	b, err := r.peek(fileHeaderLen, false)
	if err != nil {
		return err
	}
	switch magic := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]); magic {
	case magicMicro:
		r.big = true
	case magicNano:
		r.big, r.nanos = true, true
	case magicMicroSwapped:
	case magicNanoSwapped:
		r.nanos = true
	default:
		return r.errAt(ErrBadMagic)
	}
	if r.u16(b[fhVersionMajor:]) != 2 {
		return r.errAt(ErrBadVersion)
	}
	// The upper bits of the link-type field carry FCS information
	// (draft-ietf-opsawg-pcap); the link type itself is the low 16 bits.
	r.link = uint16(r.u32(b[fhLinkType:]))
	r.consume(fileHeaderLen)
	return nil
}

// nextPcap reads one classic pcap record.
func (r *Reader) nextPcap(f *source.Frame) error {
	r.blockStart = r.off
	h, err := r.peek(recordHdrLen, true)
	if err != nil {
		return err
	}
	_ = h[recordHdrLen-1]
	sec := int64(r.u32(h[rhSec:]))
	frac := int64(r.u32(h[rhFrac:]))
	capLen := r.u32(h[rhCapLen:])
	origLen := r.u32(h[rhOrigLen:])
	if capLen > MaxPacketLen {
		return r.errAt(ErrBlockTooLarge)
	}
	var data []byte
	if n := recordHdrLen + int(capLen); n <= bufSize {
		// The whole record fits in the bufio buffer: hand out a slice of
		// it (valid until the next read) instead of copying it into r.buf.
		rec, err := r.peek(n, false)
		if err != nil {
			return err
		}
		data = rec[recordHdrLen:n:n]
		r.consume(n)
	} else {
		r.consume(recordHdrLen)
		if data, err = r.readData(int(capLen)); err != nil {
			return err
		}
	}
	if !r.nanos {
		frac *= 1000
	}
	f.Data = data
	f.WireLen = int(origLen)
	f.Time = sec*1e9 + frac
	f.Link = packet.LinkType(r.link)
	f.Iface = r.DefaultIface
	return nil
}
