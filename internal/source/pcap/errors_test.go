package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
)

var le32 = binary.LittleEndian.PutUint32

// lastBlock returns the offset of the last block written to n.
func lastBlock(n *ngFile) int {
	if len(n.bounds) < 2 {
		return 0
	}
	return n.bounds[len(n.bounds)-2]
}

// Every prefix of a valid file yields exactly the records that fit whole,
// then io.EOF (cut on a boundary) or ErrTruncated at the offset of the cut
// record.
func TestTruncation(t *testing.T) {
	type file struct {
		buf          []byte
		bounds, pkts []int
		want         []rec
	}
	files := map[string]file{}

	p := newPcapFile(binary.BigEndian, 0xa1b2c3d4, 1)
	var pw []rec
	for i, n := range []int{0, 1, 5, 60} {
		p.rec(uint32(10+i), uint32(i), uint32(n+1), payload(i, n))
		pw = append(pw, rec{payload(i, n), n + 1, int64(10+i)*1e9 + int64(i)*1000, packet.LinkEthernet, "dflt"})
	}
	files["pcap"] = file{p.buf, p.bounds, p.bounds[1:], pw}
	for _, order := range []byteOrder{binary.LittleEndian, binary.BigEndian} {
		n, want := handNg(order)
		files["pcapng-"+order.String()] = file{n.buf, n.bounds, n.pkts, want}
	}

	for name, f := range files {
		t.Run(name, func(t *testing.T) {
			for n := 0; n <= len(f.buf); n++ {
				// Where the cut record or block starts.
				start := 0
				for _, b := range f.bounds {
					if b <= n {
						start = b
					}
				}
				r, err := NewReader(bytes.NewReader(f.buf[:n]))
				if n < f.bounds[0] {
					if !errors.Is(err, ErrTruncated) || !strings.HasSuffix(err.Error(), " at offset 0") {
						t.Fatalf("prefix %d: NewReader err = %v, want ErrTruncated at offset 0", n, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("prefix %d: NewReader: %v", n, err)
				}
				r.DefaultIface = "dflt"
				got, err := readAll(r)
				k := 0
				for _, e := range f.pkts {
					if e <= n {
						k++
					}
				}
				checkRecs(t, got, f.want[:k])
				if slices.Contains(f.bounds, n) {
					wantEOF(t, err)
				} else if want := fmt.Sprintf(" at offset %d", start); !errors.Is(err, ErrTruncated) || !strings.HasSuffix(err.Error(), want) {
					t.Fatalf("prefix %d: err = %v, want ErrTruncated%s", n, err, want)
				}
			}
		})
	}
}

// Hostile inputs: each gives its sentinel at the offset of the bad record
// or block, after the good frames before it, and keeps giving it.
func TestHostile(t *testing.T) {
	ng := func() *ngFile { n := &ngFile{}; n.shb(binary.LittleEndian); return n }
	type result struct {
		buf    []byte
		frames int
		err    error
		off    int
	}
	cases := map[string]func() result{
		"empty":     func() result { return result{nil, 0, ErrTruncated, 0} },
		"bad magic": func() result { return result{[]byte("GET / HTTP/1.1\r\nHost: example\r\n\r\n"), 0, ErrBadMagic, 0} },
		"pcap version": func() result {
			p := newPcapFile(binary.LittleEndian, 0xa1b2c3d4, 1)
			p.buf[4] = 3
			return result{p.buf, 0, ErrBadVersion, 0}
		},
		"pcap caplen over bound": func() result {
			p := newPcapFile(binary.LittleEndian, 0xa1b2c3d4, 1)
			p.rec(1, 2, 10, payload(1, 10))
			p.rec(1, 2, 10, payload(1, 10))
			le32(p.buf[50+8:], MaxPacketLen+1)
			return result{p.buf, 1, ErrBlockTooLarge, 50}
		},
		"shb byte-order magic": func() result {
			n := ng()
			le32(n.buf[8:], 0x12345678)
			return result{n.buf, 0, ErrBadMagic, 0}
		},
		"shb version 2": func() result {
			n := ng()
			n.buf[12] = 2
			return result{n.buf, 0, ErrBadVersion, 0}
		},
		"shb too short": func() result {
			n := ng()
			le32(n.buf[4:], 24)
			return result{n.buf, 0, ErrBadBlock, 0}
		},
		"second shb bad magic": func() result {
			n := ng()
			n.idb(packet.LinkEthernet, 0)
			n.epb(0, 1, 1, []byte{1})
			n.shb(binary.LittleEndian)
			off := lastBlock(n)
			n.buf[off+8] = 0
			return result{n.buf, 1, ErrBadMagic, off}
		},
		"length not a multiple of 4": func() result {
			n := ng()
			n.idb(packet.LinkEthernet, 0)
			n.epb(0, 1, 1, []byte{1})
			off := lastBlock(n)
			le32(n.buf[off+4:], 33)
			return result{n.buf, 0, ErrBadBlock, off}
		},
		"length below the block's minimum": func() result {
			n := ng()
			n.idb(packet.LinkEthernet, 0)
			n.block(6, make([]byte, 16)) // EPB needs 20 bytes of body
			return result{n.buf, 0, ErrBadBlock, lastBlock(n)}
		},
		"block over bound": func() result {
			n := ng()
			n.block(0x99, nil)
			off := lastBlock(n)
			le32(n.buf[off+4:], MaxBlockLen+4)
			return result{n.buf, 0, ErrBlockTooLarge, off}
		},
		"trailer mismatch": func() result {
			n := ng()
			n.idb(packet.LinkEthernet, 0)
			n.epb(0, 1, 1, []byte{1})
			off := lastBlock(n)
			le32(n.buf[len(n.buf)-4:], 40) // the block is 36 bytes
			return result{n.buf, 0, ErrBadBlock, off}
		},
		"epb caplen beyond block": func() result {
			n := ng()
			n.idb(packet.LinkEthernet, 0)
			n.epb(0, 1, 8, make([]byte, 8))
			off := lastBlock(n)
			le32(n.buf[off+20:], 9) // padded to 12: 32+12 > 40
			return result{n.buf, 0, ErrBadBlock, off}
		},
		"epb caplen over bound": func() result {
			n := ng()
			n.idb(packet.LinkEthernet, 0)
			n.epb(0, 1, 8, make([]byte, 8))
			off := lastBlock(n)
			le32(n.buf[off+20:], MaxPacketLen+4)
			return result{n.buf, 0, ErrBlockTooLarge, off}
		},
		"unknown interface": func() result {
			n := ng()
			n.idb(packet.LinkEthernet, 0)
			n.epb(0, 1, 1, []byte{1})
			n.epb(1, 1, 1, []byte{1})
			return result{n.buf, 1, ErrUnknownInterface, lastBlock(n)}
		},
		"interface of a previous section": func() result {
			n := ng()
			n.idb(packet.LinkEthernet, 0)
			n.epb(0, 1, 1, []byte{1})
			n.shb(binary.BigEndian)
			n.opb(0, 1, 1, []byte{1})
			return result{n.buf, 1, ErrUnknownInterface, lastBlock(n)}
		},
		"spb before any interface": func() result {
			n := ng()
			n.spb(4, []byte{1, 2, 3, 4})
			return result{n.buf, 0, ErrUnknownInterface, lastBlock(n)}
		},
		"idb option overruns block": func() result {
			n := ng()
			n.idb(packet.LinkEthernet, 0, n.opt(2, []byte("eth0")))
			off := lastBlock(n)
			binary.LittleEndian.PutUint16(n.buf[off+18:], 200)
			return result{n.buf, 0, ErrBadBlock, off}
		},
		"too many interfaces": func() result {
			n := ng()
			for range MaxIfaces + 1 {
				n.idb(packet.LinkEthernet, 0)
			}
			return result{n.buf, 0, ErrTooManyInterfaces, lastBlock(n)}
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			c := build()
			var got []rec
			r, err := NewReader(bytes.NewReader(c.buf))
			if err == nil {
				got, err = readAll(r)
				if err2 := r.Next(&source.Frame{}); err2 != err {
					t.Errorf("second Next after error: %v, want the same %v", err2, err)
				}
			}
			want := fmt.Sprintf(" at offset %d", c.off)
			if !errors.Is(err, c.err) || !strings.HasSuffix(err.Error(), want) {
				t.Fatalf("err = %v, want %v%s", err, c.err, want)
			}
			if len(got) != c.frames {
				t.Errorf("%d frames before the error, want %d", len(got), c.frames)
			}
		})
	}
}

// A block as large as the bound is skipped without being buffered, a long
// if_name is cut, and the packet buffer stops at MaxPacketLen.
func TestBoundedMemory(t *testing.T) {
	n := &ngFile{}
	n.shb(binary.LittleEndian)
	n.idb(packet.LinkEthernet, 0, n.opt(2, bytes.Repeat([]byte("n"), 60000)))
	n.block(0x99, make([]byte, MaxBlockLen-12))
	n.epb(0, 1, MaxPacketLen, payload(1, MaxPacketLen))
	n.epb(0, 2, 10, payload(2, 10))

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r, err := NewReader(bytes.NewReader(n.buf))
	if err != nil {
		t.Fatal(err)
	}
	var f source.Frame
	var names []string
	for {
		if err := r.Next(&f); err != nil {
			wantEOF(t, err)
			break
		}
		names = append(names, f.Iface)
	}
	runtime.ReadMemStats(&after)
	// bufio buffer (64 KiB) + packet buffer (256 KiB) + name, Reader, stats.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 400<<10 {
		t.Errorf("allocated %d bytes reading past a 16 MiB block", alloc)
	}
	if len(names) != 2 || names[0] != strings.Repeat("n", maxNameLen) {
		t.Errorf("names %d, first of length %d; want 2, cut to %d", len(names), len(names[0]), maxNameLen)
	}
	if cap(r.buf) != MaxPacketLen {
		t.Errorf("packet buffer %d bytes, want exactly the bound %d", cap(r.buf), MaxPacketLen)
	}
	if s := r.Stats(); s.Skipped[0x99] != 1 {
		t.Errorf("skipped %v", s.Skipped)
	}
}

// More distinct unknown block types than the map holds go to SkippedOther.
func TestSkippedTypesBounded(t *testing.T) {
	n := &ngFile{}
	n.shb(binary.LittleEndian)
	for i := range maxSkipTypes + 10 {
		n.block(uint32(0x1000+i), nil)
	}
	n.block(0x1000, nil)
	r, err := NewReader(bytes.NewReader(n.buf))
	if err != nil {
		t.Fatal(err)
	}
	_, err = readAll(r)
	wantEOF(t, err)
	s := r.Stats()
	if len(s.Skipped) != maxSkipTypes || s.SkippedOther != 10 || s.Skipped[0x1000] != 2 {
		t.Errorf("skipped %d types, other %d, [0x1000]=%d; want %d, 10, 2", len(s.Skipped), s.SkippedOther, s.Skipped[0x1000], maxSkipTypes)
	}
}

// Records larger than the bufio buffer take the copying path: cuts inside
// them and a bad trailer behave as for small ones.
func TestLargeRecordErrors(t *testing.T) {
	const size = 100_000 // more than bufSize
	n := &ngFile{}
	n.shb(binary.LittleEndian)
	n.idb(packet.LinkEthernet, 0)
	n.epb(0, 1, size, payload(1, size), n.opt(1, []byte("a comment")), n.opt(0, nil))
	start := lastBlock(n)
	p := newPcapFile(binary.LittleEndian, 0xa1b2c3d4, 1)
	p.rec(1, 2, size, payload(1, size))
	for _, c := range []struct {
		name       string
		buf        []byte
		start, end int
	}{{"pcapng", n.buf, start, len(n.buf)}, {"pcap", p.buf, 24, len(p.buf)}} {
		for _, cut := range []int{c.start + 10, c.start + 40, c.start + size/2, c.end - 10, c.end - 2} {
			got, err := readBytes(c.buf[:cut])
			if want := fmt.Sprintf(" at offset %d", c.start); len(got) != 0 || !errors.Is(err, ErrTruncated) || !strings.HasSuffix(err.Error(), want) {
				t.Errorf("%s cut at %d: %d frames, err %v; want 0 and ErrTruncated%s", c.name, cut, len(got), err, want)
			}
		}
		got, err := readBytes(c.buf)
		wantEOF(t, err)
		if len(got) != 1 || !bytes.Equal(got[0].data, payload(1, size)) || got[0].wire != size {
			t.Errorf("%s: whole file gave %d frames", c.name, len(got))
		}
	}
	bad := bytes.Clone(n.buf)
	le32(bad[len(bad)-4:], uint32(len(bad)-start+4))
	if _, err := readBytes(bad); !errors.Is(err, ErrBadBlock) || !strings.HasSuffix(err.Error(), fmt.Sprintf(" at offset %d", start)) {
		t.Errorf("large block with a bad trailer: %v", err)
	}
}
