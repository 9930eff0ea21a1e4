package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/weir-dev/weir/internal/packet"
)

// ErrBadPacket is returned by the writers for a packet they refuse to
// write: negative or out-of-range timestamp, wire length shorter than the
// data, or data longer than MaxPacketLen.
var ErrBadPacket = errors.New("pcap: packet cannot be written")

var le = binary.LittleEndian

func checkPacket(wireLen int, data []byte) error {
	if len(data) > MaxPacketLen {
		return fmt.Errorf("%w: %d captured bytes, more than %d", ErrBadPacket, len(data), MaxPacketLen)
	}
	if wireLen < len(data) || uint64(wireLen) > math.MaxUint32 { // uint64: int may be 32 bits
		return fmt.Errorf("%w: wire length %d with %d captured bytes", ErrBadPacket, wireLen, len(data))
	}
	return nil
}

// Writer writes a classic pcap file: little endian, nanosecond timestamps.
type Writer struct {
	bw  *bufio.Writer
	hdr [recordHdrLen]byte
}

// NewWriter writes the pcap file header to w. A snaplen of 0 or less is
// written as MaxPacketLen.
func NewWriter(w io.Writer, link packet.LinkType, snaplen int) (*Writer, error) {
	if snaplen <= 0 || snaplen > MaxPacketLen {
		snaplen = MaxPacketLen
	}
	pw := &Writer{bw: bufio.NewWriter(w)}
	var h [fileHeaderLen]byte
	le.PutUint32(h[0:], magicNano)
	le.PutUint16(h[4:], 2) // version 2.4
	le.PutUint16(h[6:], 4)
	// thiszone and sigfigs stay 0
	le.PutUint32(h[fhSnaplen:], uint32(snaplen))
	le.PutUint32(h[fhLinkType:], uint32(link))
	if _, err := pw.bw.Write(h[:]); err != nil {
		return nil, err
	}
	return pw, nil
}

// WritePacket writes one record: ts is Unix nanoseconds (0 up to year
// 2106), wireLen the frame's length on the wire, data the captured bytes.
func (w *Writer) WritePacket(ts int64, wireLen int, data []byte) error {
	if err := checkPacket(wireLen, data); err != nil {
		return err
	}
	if ts < 0 || ts/1e9 > 1<<32-1 {
		return fmt.Errorf("%w: timestamp %d does not fit a pcap record", ErrBadPacket, ts)
	}
	h := w.hdr[:]
	le.PutUint32(h[rhSec:], uint32(ts/1e9))
	le.PutUint32(h[rhFrac:], uint32(ts%1e9))
	le.PutUint32(h[rhCapLen:], uint32(len(data)))
	le.PutUint32(h[rhOrigLen:], uint32(wireLen))
	if _, err := w.bw.Write(h); err != nil {
		return err
	}
	_, err := w.bw.Write(data)
	return err
}

// Flush writes any buffered data to the underlying writer.
func (w *Writer) Flush() error { return w.bw.Flush() }

// NgWriter writes a pcapng section: little endian, nanosecond timestamps
// on every interface.
type NgWriter struct {
	bw     *bufio.Writer
	nIface int
	hdr    [pktFixedLen]byte
}

// NewNgWriter writes a Section Header Block to w at once. Calling it again
// on the same w (after Flush) starts a new section.
func NewNgWriter(w io.Writer) (*NgWriter, error) {
	nw := &NgWriter{bw: bufio.NewWriter(w)}
	var h [shbMinLen]byte
	le.PutUint32(h[0:], blockSHB)
	le.PutUint32(h[4:], shbMinLen)
	le.PutUint32(h[shbMagic:], byteOrderMagic)
	le.PutUint16(h[shbMajor:], 1)
	le.PutUint16(h[shbMajor+2:], 0)
	le.PutUint64(h[16:], ^uint64(0)) // section length: unspecified
	le.PutUint32(h[24:], shbMinLen)
	if _, err := nw.bw.Write(h[:]); err != nil {
		return nil, err
	}
	if err := nw.bw.Flush(); err != nil {
		return nil, err
	}
	return nw, nil
}

// AddInterface writes an Interface Description Block with if_name (when
// name is not empty) and if_tsresol=9 (nanoseconds), and returns the
// interface's ID for WritePacket. A snaplen of 0 or less means no limit.
func (w *NgWriter) AddInterface(name string, link packet.LinkType, snaplen int) (int, error) {
	if len(name) > 0xffff-3 {
		return 0, fmt.Errorf("pcap: interface name of %d bytes is too long", len(name))
	}
	if snaplen < 0 || snaplen > MaxPacketLen {
		snaplen = 0
	}
	nameOpt := 0
	if name != "" {
		nameOpt = 4 + (len(name)+3)&^3
	}
	total := idbMinLen + nameOpt + 8 + 4 // + tsresol option (4+1, padded to 8) + end of options
	var b [idbFixedLen]byte
	le.PutUint32(b[0:], blockIDB)
	le.PutUint32(b[4:], uint32(total))
	le.PutUint16(b[idbLink:], uint16(link))
	le.PutUint32(b[idbSnaplen:], uint32(snaplen))
	w.bw.Write(b[:])
	if name != "" {
		w.option(optIfName, len(name))
		w.bw.WriteString(name)
		w.pad(len(name))
	}
	w.option(optTsresol, 1)
	w.bw.Write([]byte{9, 0, 0, 0}) // 10^-9 s, padded
	w.option(optEnd, 0)
	if err := w.u32(uint32(total)); err != nil {
		return 0, err
	}
	w.nIface++
	return w.nIface - 1, nil
}

// WritePacket writes an Enhanced Packet Block on interface iface: ts is
// Unix nanoseconds, wireLen the frame's length on the wire, data the
// captured bytes (padded to 32 bits in the file).
func (w *NgWriter) WritePacket(iface int, ts int64, wireLen int, data []byte) error {
	if iface < 0 || iface >= w.nIface {
		return fmt.Errorf("%w: interface %d of %d", ErrUnknownInterface, iface, w.nIface)
	}
	if err := checkPacket(wireLen, data); err != nil {
		return err
	}
	if ts < 0 {
		return fmt.Errorf("%w: negative timestamp %d", ErrBadPacket, ts)
	}
	total := pktMinLen + (len(data)+3)&^3
	h := w.hdr[:]
	le.PutUint32(h[0:], blockEPB)
	le.PutUint32(h[4:], uint32(total))
	le.PutUint32(h[pktIface:], uint32(iface))
	le.PutUint32(h[pktTsHigh:], uint32(uint64(ts)>>32))
	le.PutUint32(h[pktTsLow:], uint32(ts))
	le.PutUint32(h[pktCapLen:], uint32(len(data)))
	le.PutUint32(h[pktOrigLen:], uint32(wireLen))
	w.bw.Write(h)
	w.bw.Write(data)
	w.pad(len(data))
	return w.u32(uint32(total))
}

// Flush writes any buffered data to the underlying writer.
func (w *NgWriter) Flush() error { return w.bw.Flush() }

func (w *NgWriter) option(code, n int) {
	var b [4]byte
	le.PutUint16(b[0:], uint16(code))
	le.PutUint16(b[2:], uint16(n))
	w.bw.Write(b[:])
}

var zeros [4]byte

func (w *NgWriter) pad(n int) {
	w.bw.Write(zeros[:(4-n%4)%4])
}

// u32 writes v; bufio.Writer keeps the first write error, so checking the
// last write of a block reports any failure in it.
func (w *NgWriter) u32(v uint32) error {
	var b [4]byte
	le.PutUint32(b[:], v)
	_, err := w.bw.Write(b[:])
	return err
}
