// Package pcap reads and writes capture files in the classic pcap format and
// in pcapng, in pure Go. Reader is a source.PacketSource for one capture,
// gzip- or zstd-compressed or not (told by the magic, not the name); Files
// chains several (and standard input) into one stream for
// `weir capture --read FILE...`; Writer and NgWriter produce files for tests
// and sample captures.
//
// The reader treats its input as hostile: every failure is one of the
// sentinel errors below, wrapped with the byte offset of the record or block
// where it happened (in the decompressed data, for compressed input);
// lengths are checked against fixed bounds before any buffer grows; and Next
// does not allocate once its buffer has grown to the largest packet.
package pcap

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/weir-dev/weir/internal/source"
)

// Bounds on what the reader accepts; anything larger is ErrBlockTooLarge.
const (
	MaxPacketLen = 256 << 10 // largest captured length of one packet (libpcap's maximum snaplen)
	MaxBlockLen  = 16 << 20  // largest pcapng block of any type
	MaxIfaces    = 4096      // most interfaces in one pcapng section
	// MaxZstdWindow bounds the memory a zstd stream may ask for: what the
	// zstd tool itself decompresses without --memory (128 MiB, --long=27).
	MaxZstdWindow = 128 << 20
)

// Sentinel errors. Every error from the reader wraps one of these (or an
// error from the underlying io.Reader) together with "at offset N", the
// byte offset of the record or block where the problem was found.
var (
	ErrBadMagic          = errors.New("pcap: not a pcap or pcapng file (bad magic)")
	ErrBadVersion        = errors.New("pcap: unsupported format version")
	ErrTruncated         = errors.New("pcap: file ends inside a header or record")
	ErrBlockTooLarge     = errors.New("pcap: record or block larger than the reader's bound")
	ErrBadBlock          = errors.New("pcap: inconsistent block lengths")
	ErrUnknownInterface  = errors.New("pcap: packet refers to an undeclared interface")
	ErrTooManyInterfaces = errors.New("pcap: too many interfaces in one section")
	ErrCompression       = errors.New("pcap: compressed in a format weir does not read")
	ErrDecompress        = errors.New("pcap: the compressed data is damaged or asks for too much memory")
)

// Format is the container format of a capture file.
type Format uint8

// Formats the reader understands.
const (
	FormatPcap   Format = 1 // classic libpcap format
	FormatPcapng Format = 2 // pcapng
)

// String names the format.
func (f Format) String() string {
	switch f {
	case FormatPcap:
		return "pcap"
	case FormatPcapng:
		return "pcapng"
	}
	return "unknown"
}

// Stats counts what a Reader has read so far.
type Stats struct {
	Format        Format
	Compression   string            // "gzip", "zstd", or "" for an uncompressed capture
	Packets       uint64            // frames returned by Next
	Bytes         uint64            // bytes of input consumed (decompressed)
	CapturedBytes uint64            // sum of len(Frame.Data)
	WireBytes     uint64            // sum of Frame.WireLen
	Sections      uint64            // pcapng Section Header Blocks
	Interfaces    uint64            // pcapng Interface Description Blocks, all sections
	Skipped       map[uint32]uint64 // pcapng blocks skipped, by block type (a copy)
	SkippedOther  uint64            // skipped blocks whose type did not fit in Skipped (more than maxSkipTypes distinct types)
	Files         uint64            // Files only: inputs opened so far
}

const (
	bufSize      = 64 << 10 // bufio buffer: every fixed header is peeked from it in place
	minDataBuf   = 2 << 10  // first size of the packet buffer
	maxSkipTypes = 64       // distinct block types counted in Stats.Skipped; the rest go to SkippedOther
	maxNameLen   = 256      // longest if_name kept (longer names are cut)
)

// Reader reads frames from a pcap or pcapng stream. It is not safe for
// concurrent use.
type Reader struct {
	// DefaultIface names frames whose interface has no name: every frame of
	// a classic pcap file and pcapng interfaces without if_name. Open sets
	// it to the file's base name without extension.
	DefaultIface string

	br     *bufio.Reader
	closer io.Closer // the file Open opened
	dec    io.Closer // the decompressor, if the input is compressed
	comp   string    // "gzip", "zstd" or ""
	format Format
	err    error // sticky: once set, Next returns it forever

	off        int64 // bytes consumed from br
	blockStart int64 // offset of the record or block being parsed

	buf []byte // data of records too big for the bufio buffer, reused; grows to the largest (≤ MaxPacketLen)

	// classic pcap
	big   bool // byte order of the file (pcap) or current section (pcapng)
	nanos bool // nanosecond timestamps (pcap)
	link  uint16

	// pcapng
	ifaces   []iface
	lastTime int64 // time of the previous packet, for Simple Packet Blocks

	stats   Stats
	skipped map[uint32]uint64
}

// Open opens a capture file. DefaultIface is the file's base name without
// its extensions (.pcap, .pcapng, and .gz or .zst before them); Close closes
// the file.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.DefaultIface = BaseName(path)
	r.closer = f
	return r, nil
}

// BaseName is a capture file's name without its directory and extensions:
// "trace" for "/tmp/trace.pcapng.gz".
func BaseName(path string) string {
	base := filepath.Base(path)
	for _, z := range []string{".gz", ".zst", ".zstd"} {
		if strings.HasSuffix(base, z) && len(base) > len(z) {
			base = base[:len(base)-len(z)]
			break
		}
	}
	if e := filepath.Ext(base); len(e) < len(base) {
		base = base[:len(base)-len(e)]
	}
	return base
}

// Magic numbers of compressed streams: the ones read, and the ones named
// in ErrCompression so the user knows which tool to use.
var (
	magicGzip  = []byte{0x1f, 0x8b}
	magicZstd  = []byte{0x28, 0xb5, 0x2f, 0xfd}
	magicOther = []struct {
		magic []byte
		tool  string
	}{
		{[]byte{0xfd, '7', 'z', 'X', 'Z', 0}, "xz"},
		{[]byte("BZh"), "bzip2"},
		{[]byte{0x04, 0x22, 0x4d, 0x18}, "lz4"},
		{[]byte{0x89, 'L', 'Z', 'O'}, "lzop"},
	}
)

// NewReader reads the file header from rd, telling pcap from pcapng by the
// first four bytes. A gzip or zstd stream (told by its magic) is
// decompressed as it is read; Close releases the decompressor. It wraps rd
// in a bufio.Reader of its own.
func NewReader(rd io.Reader) (*Reader, error) {
	r := &Reader{br: bufio.NewReaderSize(rd, bufSize)}
	head, _ := r.br.Peek(6) // short input: the format check below says so
	switch {
	case bytes.HasPrefix(head, magicGzip):
		z, err := gzip.NewReader(r.br)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%w at offset 0 (inside the gzip header)", ErrTruncated)
		}
		if err != nil {
			return nil, fmt.Errorf("%w (gzip header): %w", ErrDecompress, err)
		}
		r.br, r.dec, r.comp = bufio.NewReaderSize(z, bufSize), z, "gzip"
	case bytes.HasPrefix(head, magicZstd):
		z, err := zstd.NewReader(r.br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(MaxZstdWindow))
		if err != nil {
			return nil, fmt.Errorf("%w (zstd): %w", ErrDecompress, err)
		}
		zr := z.IOReadCloser()
		r.br, r.dec, r.comp = bufio.NewReaderSize(zr, bufSize), zr, "zstd"
	default:
		for _, o := range magicOther {
			if bytes.HasPrefix(head, o.magic) {
				return nil, fmt.Errorf("%w (%s): decompress it first, e.g. %s -dc FILE | weir capture --read -", ErrCompression, o.tool, o.tool)
			}
		}
	}
	b, err := r.peek(4, false)
	if err != nil {
		r.closeDec()
		return nil, err
	}
	switch magic := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]); magic {
	case blockSHB:
		r.format = FormatPcapng
		err = r.readSHB()
	default:
		r.format = FormatPcap
		err = r.readFileHeader()
	}
	if err != nil {
		r.closeDec()
		return nil, err
	}
	r.stats.Format = r.format
	r.stats.Compression = r.comp
	return r, nil
}

// Format reports whether the input is pcap or pcapng.
func (r *Reader) Format() Format { return r.format }

// Next fills f with the next frame. It returns io.EOF at the clean end of
// the input; f.Data is valid until the next call. After any error, Next
// keeps returning that error.
func (r *Reader) Next(f *source.Frame) error {
	if r.err != nil {
		return r.err
	}
	var err error
	if r.format == FormatPcap {
		err = r.nextPcap(f)
	} else {
		err = r.nextPcapng(f)
	}
	if err != nil {
		r.err = err
		return err
	}
	r.stats.Packets++
	r.stats.CapturedBytes += uint64(len(f.Data))
	r.stats.WireBytes += uint64(f.WireLen)
	return nil
}

// Stats returns the counters so far.
func (r *Reader) Stats() Stats {
	s := r.stats
	s.Bytes = uint64(r.off)
	if len(r.skipped) > 0 {
		s.Skipped = make(map[uint32]uint64, len(r.skipped))
		for k, v := range r.skipped {
			s.Skipped[k] = v
		}
	}
	return s
}

// Close closes the file opened by Open (for a Reader from NewReader there
// is nothing to close). Next then returns source.ErrStopped.
func (r *Reader) Close() error {
	if r.err == nil {
		r.err = source.ErrStopped
	}
	r.closeDec()
	if r.closer == nil {
		return nil
	}
	c := r.closer
	r.closer = nil
	return c.Close()
}

// closeDec releases the decompressor (zstd's holds buffers until then).
func (r *Reader) closeDec() {
	if r.dec != nil {
		r.dec.Close()
		r.dec = nil
	}
}

// errAt labels a sentinel with the offset of the current record or block.
func (r *Reader) errAt(sentinel error) error {
	return fmt.Errorf("%w at offset %d%s", sentinel, r.blockStart, r.offNote())
}

// offNote says what the offsets count in: for compressed input, bytes of
// the decompressed data, not of the file.
func (r *Reader) offNote() string {
	if r.comp == "" {
		return ""
	}
	return " of the decompressed data"
}

// ioErr turns a read error into ErrTruncated (end of input) or wraps the
// underlying error with the offset.
func (r *Reader) ioErr(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return r.errAt(ErrTruncated)
	}
	if r.comp != "" {
		return fmt.Errorf("%w (%s, at offset %d of the decompressed data): %w", ErrDecompress, r.comp, r.off, err)
	}
	return fmt.Errorf("pcap: read at offset %d: %w", r.off, err)
}

// peek returns the next n bytes (n ≤ bufSize) without consuming them. With
// atStart, an input that ends exactly here gives a bare io.EOF.
func (r *Reader) peek(n int, atStart bool) ([]byte, error) {
	b, err := r.br.Peek(n)
	if err == nil {
		return b, nil
	}
	if atStart && len(b) == 0 && err == io.EOF {
		return nil, io.EOF
	}
	return nil, r.ioErr(err)
}

// consume drops n bytes that were already peeked (so Discard cannot fail).
func (r *Reader) consume(n int) {
	_, _ = r.br.Discard(n) // peeked already: cannot fail
	r.off += int64(n)
}

// skip discards n bytes of input.
func (r *Reader) skip(n int) error {
	d, err := r.br.Discard(n)
	r.off += int64(d)
	if err != nil {
		return r.ioErr(err)
	}
	return nil
}

// readData reads n ≤ MaxPacketLen bytes into the reused packet buffer.
func (r *Reader) readData(n int) ([]byte, error) {
	if n > cap(r.buf) {
		// Grow geometrically so a file of slowly growing packets costs
		// O(log MaxPacketLen) allocations, never more than the bound.
		c := max(n, 2*cap(r.buf), minDataBuf)
		r.buf = make([]byte, min(c, MaxPacketLen))
	}
	b := r.buf[:n]
	got, err := io.ReadFull(r.br, b)
	r.off += int64(got)
	if err != nil {
		return nil, r.ioErr(err)
	}
	return b, nil
}

// u16 and u32 decode in the current byte order; a branch is cheaper than a
// binary.ByteOrder interface call, which cannot be inlined.
func (r *Reader) u16(b []byte) uint16 {
	_ = b[1]
	if r.big {
		return uint16(b[0])<<8 | uint16(b[1])
	}
	return uint16(b[1])<<8 | uint16(b[0])
}

func (r *Reader) u32(b []byte) uint32 {
	_ = b[3]
	if r.big {
		return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	}
	return uint32(b[3])<<24 | uint32(b[2])<<16 | uint32(b[1])<<8 | uint32(b[0])
}
