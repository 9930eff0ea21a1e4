package pcap

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
)

// fuzzMaxFrames bounds how many frames one input is read for.
const fuzzMaxFrames = 1000

var sentinels = []error{io.EOF, ErrBadMagic, ErrBadVersion, ErrTruncated, ErrBlockTooLarge,
	ErrBadBlock, ErrUnknownInterface, ErrTooManyInterfaces, ErrCompression, ErrDecompress}

func isSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func FuzzReader(f *testing.F) {
	for _, order := range []byteOrder{binary.LittleEndian, binary.BigEndian} {
		for _, magic := range []uint32{0xa1b2c3d4, 0xa1b23c4d} {
			p := newPcapFile(order, magic, 1)
			p.rec(1, 2, 60, payload(1, 60))
			p.rec(3, 4, 100, payload(2, 7))
			f.Add(p.buf)
		}
		n, _ := handNg(order)
		f.Add(n.buf)
		f.Add(n.buf[:len(n.buf)-9]) // truncated inside the last block
	}
	var buf bytes.Buffer
	w, _ := NewNgWriter(&buf)
	w.AddInterface("eth0", packet.LinkEthernet, 0)
	w.AddInterface("wg0", packet.LinkRaw, 1500)
	w.WritePacket(0, t0, 60, payload(1, 60))
	w.WritePacket(1, t0+1, 1500, payload(2, 33))
	w.Flush()
	f.Add(bytes.Clone(buf.Bytes()))
	f.Add(buf.Bytes()[:buf.Len()/2])
	f.Add(benchPcap(f, 3))
	// Compressed: gzip (Go's writer) and zstd (raw blocks and a window
	// size the fuzzer can grow), so the decompressors' errors are checked too.
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(buf.Bytes())
	zw.Close()
	f.Add(bytes.Clone(z.Bytes()))
	zst := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 10 << 3}
	n := buf.Len()
	zst = append(zst, byte(n<<3|1), byte(n>>5), byte(n>>13))
	f.Add(append(zst, buf.Bytes()...))

	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := NewReader(bytes.NewReader(b))
		if err != nil {
			if !isSentinel(err) {
				t.Fatalf("NewReader: unlabelled error %v", err)
			}
			return
		}
		defer r.Close()
		var fr source.Frame
		for range fuzzMaxFrames {
			if err := r.Next(&fr); err != nil {
				if !isSentinel(err) {
					t.Fatalf("Next: unlabelled error %v", err)
				}
				return
			}
			if len(fr.Data) > MaxPacketLen || (r.comp == "" && len(fr.Data) > len(b)) {
				t.Fatalf("frame of %d bytes from an input of %d", len(fr.Data), len(b))
			}
			if cap(r.buf) > MaxPacketLen {
				t.Fatalf("packet buffer grew to %d", cap(r.buf))
			}
		}
	})
}
