package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
)

// The builders below write capture files byte by byte from the format
// specifications (libpcap file format, pcapng draft), independently of
// Writer and NgWriter, so the reader is checked against bytes it did not
// produce. Each records the offsets where a record or block ends.

// byteOrder is what binary.LittleEndian and binary.BigEndian both are.
type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

// rec is one expected frame.
type rec struct {
	data  []byte
	wire  int
	time  int64
	link  packet.LinkType
	iface string
}

// pcapFile builds a classic pcap file.
type pcapFile struct {
	buf    []byte
	order  byteOrder
	bounds []int // file length after the header and after each record
}

// newPcapFile writes a file header with the given magic (as a number, so
// the byte order decides how it lands in the file) and link-type field.
func newPcapFile(order byteOrder, magic, linkField uint32) *pcapFile {
	p := &pcapFile{order: order}
	p.buf = order.AppendUint32(p.buf, magic)
	p.buf = order.AppendUint16(p.buf, 2)
	p.buf = order.AppendUint16(p.buf, 4)
	p.buf = order.AppendUint32(p.buf, 0) // thiszone
	p.buf = order.AppendUint32(p.buf, 0) // sigfigs
	p.buf = order.AppendUint32(p.buf, 65535)
	p.buf = order.AppendUint32(p.buf, linkField)
	p.bounds = append(p.bounds, len(p.buf))
	return p
}

func (p *pcapFile) rec(sec, frac, orig uint32, data []byte) {
	p.buf = p.order.AppendUint32(p.buf, sec)
	p.buf = p.order.AppendUint32(p.buf, frac)
	p.buf = p.order.AppendUint32(p.buf, uint32(len(data)))
	p.buf = p.order.AppendUint32(p.buf, orig)
	p.buf = append(p.buf, data...)
	p.bounds = append(p.bounds, len(p.buf))
}

// ngFile builds a pcapng file.
type ngFile struct {
	buf    []byte
	order  byteOrder
	bounds []int // file length after each block
	pkts   []int // file length after each block that holds a packet
}

func pad4(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// block appends a block; body is padded to 32 bits.
func (n *ngFile) block(typ uint32, body []byte) {
	body = pad4(append([]byte(nil), body...))
	total := uint32(12 + len(body))
	n.buf = n.order.AppendUint32(n.buf, typ)
	n.buf = n.order.AppendUint32(n.buf, total)
	n.buf = append(n.buf, body...)
	n.buf = n.order.AppendUint32(n.buf, total)
	n.bounds = append(n.bounds, len(n.buf))
}

// shb starts a section in the given byte order.
func (n *ngFile) shb(order byteOrder) {
	n.order = order
	var body []byte
	body = order.AppendUint32(body, 0x1A2B3C4D)
	body = order.AppendUint16(body, 1)
	body = order.AppendUint16(body, 0)
	body = order.AppendUint64(body, ^uint64(0))
	body = append(body, n.opt(3, []byte("test hardware"))...) // shb_hardware, ignored
	body = append(body, n.opt(0, nil)...)
	n.block(0x0A0D0D0A, body)
}

// opt encodes one option, padded.
func (n *ngFile) opt(code uint16, val []byte) []byte {
	var b []byte
	b = n.order.AppendUint16(b, code)
	b = n.order.AppendUint16(b, uint16(len(val)))
	return pad4(append(b, val...))
}

func (n *ngFile) idb(link packet.LinkType, snaplen uint32, opts ...[]byte) {
	var body []byte
	body = n.order.AppendUint16(body, uint16(link))
	body = n.order.AppendUint16(body, 0)
	body = n.order.AppendUint32(body, snaplen)
	for _, o := range opts {
		body = append(body, o...)
	}
	if len(opts) > 0 {
		body = append(body, n.opt(0, nil)...)
	}
	n.block(1, body)
}

func (n *ngFile) epb(iface uint32, ts uint64, orig uint32, data []byte, opts ...[]byte) {
	var body []byte
	body = n.order.AppendUint32(body, iface)
	body = n.order.AppendUint32(body, uint32(ts>>32))
	body = n.order.AppendUint32(body, uint32(ts))
	body = n.order.AppendUint32(body, uint32(len(data)))
	body = n.order.AppendUint32(body, orig)
	body = pad4(append(body, data...))
	for _, o := range opts {
		body = append(body, o...)
	}
	n.block(6, body)
	n.pkts = append(n.pkts, len(n.buf))
}

func (n *ngFile) opb(iface uint16, ts uint64, orig uint32, data []byte) {
	var body []byte
	body = n.order.AppendUint16(body, iface)
	body = n.order.AppendUint16(body, 7) // drops count
	body = n.order.AppendUint32(body, uint32(ts>>32))
	body = n.order.AppendUint32(body, uint32(ts))
	body = n.order.AppendUint32(body, uint32(len(data)))
	body = n.order.AppendUint32(body, orig)
	n.block(2, append(body, data...))
	n.pkts = append(n.pkts, len(n.buf))
}

// spb writes a Simple Packet Block holding data (the caller passes the
// captured part: min(orig, snaplen) bytes).
func (n *ngFile) spb(orig uint32, data []byte) {
	body := n.order.AppendUint32(nil, orig)
	n.block(3, append(body, data...))
	n.pkts = append(n.pkts, len(n.buf))
}

// payload returns n distinct bytes for packet number i.
func payload(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*31 + j*7 + 1)
	}
	return b
}

// readAll reads every frame, copying data, until the first error.
func readAll(r *Reader) ([]rec, error) {
	var out []rec
	var f source.Frame
	for {
		if err := r.Next(&f); err != nil {
			return out, err
		}
		out = append(out, rec{append([]byte{}, f.Data...), f.WireLen, f.Time, f.Link, f.Iface})
	}
}

// readBytes opens b with NewReader and reads it all.
func readBytes(b []byte) ([]rec, error) {
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return readAll(r)
}

// checkRecs compares frames exactly.
func checkRecs(t *testing.T, got, want []rec) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d frames, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !bytes.Equal(g.data, w.data) || g.wire != w.wire || g.time != w.time || g.link != w.link || g.iface != w.iface {
			t.Errorf("frame %d:\n got len=%d wire=%d time=%d link=%v iface=%q\nwant len=%d wire=%d time=%d link=%v iface=%q",
				i, len(g.data), g.wire, g.time, g.link, g.iface, len(w.data), w.wire, w.time, w.link, w.iface)
			if !bytes.Equal(g.data, w.data) {
				t.Errorf("frame %d: data differs", i)
			}
		}
	}
}

// wantEOF fails unless err is a clean io.EOF.
func wantEOF(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, io.EOF) {
		t.Fatalf("err = %v, want io.EOF", err)
	}
}

// handNg builds a pcapng file with resolutions, options and block types
// that NgWriter never produces, and the frames it holds (DefaultIface
// "dflt"). Expected times are worked out by hand in the comments.
func handNg(order byteOrder) (*ngFile, []rec) {
	n := &ngFile{}
	n.shb(order)
	// 0: microseconds, named, snaplen 8 (limits Simple Packet Blocks).
	n.idb(packet.LinkEthernet, 8, n.opt(2, []byte("usec0")), n.opt(9, []byte{6}))
	// 1: 2^-10 s units, 100 s offset, name with a NUL terminator.
	tsoff := order.AppendUint64(nil, 100)
	n.idb(packet.LinkRaw, 0, n.opt(2, []byte("bin1\x00")), n.opt(9, []byte{0x80 | 10}), n.opt(14, tsoff))
	// 2: no options at all: default microseconds, no name.
	n.idb(packet.LinkIPv4, 0)
	n.block(4, []byte{0, 0, 0, 0})                    // Name Resolution Block, empty
	n.block(0x7A7A7A7A, []byte("opaque vendor data")) // unknown type
	n.epb(0, 1_700_000_000_123_456, 60, payload(1, 60), n.opt(1, []byte("comment")), n.opt(0, nil))
	n.spb(20, payload(2, 8))               // 20 on the wire, snaplen 8: 8 bytes captured, previous time
	n.epb(1, 5*1024+512, 9, payload(3, 9)) // 5.5 s in 2^-10 units, + 100 s
	n.spb(3, payload(4, 3))                // shorter than the snaplen: all of it
	n.block(0x7A7A7A7A, nil)
	n.opb(2, 2_000_001, 4, payload(5, 4)) // obsolete Packet Block: 2.000001 s
	n.epb(1, 1, 1, payload(6, 1))         // 1/1024 s = 976562.5 ns, floored, + 100 s
	const us = int64(1_700_000_000_123_456_000)
	return n, []rec{
		{payload(1, 60), 60, us, packet.LinkEthernet, "usec0"},
		{payload(2, 8), 20, us, packet.LinkEthernet, "usec0"},
		{payload(3, 9), 9, 105_500_000_000, packet.LinkRaw, "bin1"},
		{payload(4, 3), 3, 105_500_000_000, packet.LinkEthernet, "usec0"},
		{payload(5, 4), 4, 2_000_001_000, packet.LinkIPv4, "dflt"},
		{payload(6, 1), 1, 100_000_976_562, packet.LinkRaw, "bin1"},
	}
}
