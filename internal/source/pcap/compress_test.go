package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	stdgzip "compress/gzip"
)

// compressWith runs a real compressor (gzip, zstd, xz) over b.
func compressWith(t *testing.T, tool string, b []byte, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not installed; run scripts/deps.sh: CI must not skip it", tool)
		}
		t.Skipf("%s not installed; run scripts/deps.sh", tool)
	}
	cmd := exec.Command(bin, append([]string{"-c"}, args...)...)
	cmd.Stdin = bytes.NewReader(b)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return out
}

// testCaptures: a classic pcap file and a pcapng file with their frames.
func testCaptures() map[string]struct {
	buf  []byte
	want []rec
} {
	p := newPcapFile(binary.LittleEndian, 0xa1b2c3d4, 1)
	var pw []rec
	for i, n := range []int{60, 1514, 9000, 40} {
		p.rec(uint32(10+i), uint32(i), uint32(n), payload(i, n))
		pw = append(pw, rec{payload(i, n), n, int64(10+i)*1e9 + int64(i)*1000, 1, "dflt"})
	}
	ng, nw := handNg(binary.BigEndian)
	return map[string]struct {
		buf  []byte
		want []rec
	}{"pcap": {p.buf, pw}, "pcapng": {ng.buf, nw}}
}

// TestCompressed: what gzip and zstd (the tools) write reads back frame
// for frame, told by the magic alone; a gzip file of several members (cat
// a.gz b.gz) is one stream, as zcat reads it.
func TestCompressed(t *testing.T) {
	for name, c := range testCaptures() {
		for _, tool := range []string{"gzip", "zstd"} {
			z := compressWith(t, tool, c.buf, "-q")
			r, err := NewReader(bytes.NewReader(z))
			if err != nil {
				t.Fatalf("%s %s: %v", name, tool, err)
			}
			r.DefaultIface = "dflt"
			got, err := readAll(r)
			wantEOF(t, err)
			checkRecs(t, got, c.want)
			if s := r.Stats(); s.Compression != tool || s.Bytes != uint64(len(c.buf)) || s.Packets != uint64(len(c.want)) {
				t.Errorf("%s %s: stats %+v", name, tool, s)
			}
			if err := r.Close(); err != nil {
				t.Errorf("%s %s: Close: %v", name, tool, err)
			}
		}
		// Two gzip members, cut anywhere, written by Go's own gzip (a second
		// implementation beside the tool).
		half := len(c.buf) / 3
		var members bytes.Buffer
		for _, part := range [][]byte{c.buf[:half], c.buf[half:]} {
			w := stdgzip.NewWriter(&members)
			w.Write(part)
			w.Close()
		}
		got, err := readBytes(members.Bytes())
		wantEOF(t, err)
		for i := range got {
			if got[i].iface == "" {
				got[i].iface = "dflt"
			}
		}
		want := c.want
		for i := range want {
			if want[i].iface == "" {
				want[i].iface = "dflt"
			}
		}
		checkRecs(t, got, want)
	}
}

// TestCompressedDamage: a cut compressed stream ends in ErrTruncated (the
// frames before the cut are read), damaged data in ErrDecompress, never a
// panic or a made-up frame; offsets are said to count decompressed bytes.
func TestCompressedDamage(t *testing.T) {
	c := testCaptures()["pcap"]
	for _, tool := range []string{"gzip", "zstd"} {
		z := compressWith(t, tool, c.buf, "-q")
		for _, cut := range []int{1, 2, 5, len(z) / 2, len(z) - 9, len(z) - 1} {
			got, err := readBytes(z[:cut])
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrDecompress) {
				t.Errorf("%s cut at %d of %d: %v, want ErrTruncated or ErrDecompress", tool, cut, len(z), err)
			}
			for i, g := range got {
				if !bytes.Equal(g.data, c.want[i].data) {
					t.Errorf("%s cut at %d: frame %d differs", tool, cut, i)
				}
			}
		}
		got, err := readBytes(z[:len(z)-1])
		if len(got) > len(c.want) || err == nil {
			t.Errorf("%s: cut trailer gave %d frames, %v", tool, len(got), err)
		}
		if errors.Is(err, ErrTruncated) && !strings.Contains(err.Error(), "of the decompressed data") {
			t.Errorf("%s: offset not labelled: %v", tool, err)
		}
		bad := bytes.Clone(z)
		for i := len(bad) / 3; i < len(bad)*2/3; i++ {
			bad[i] ^= 0x5a
		}
		got, err = readBytes(bad)
		if err == nil || (!errors.Is(err, ErrDecompress) && !errors.Is(err, ErrTruncated) && !isSentinel(err)) {
			t.Errorf("%s damaged: %d frames, err %v", tool, len(got), err)
		}
	}
	// gzip's CRC catches a flipped byte that inflates fine.
	var one bytes.Buffer
	w := stdgzip.NewWriter(&one)
	w.Write(c.buf)
	w.Close()
	z := one.Bytes()
	binary.LittleEndian.PutUint32(z[len(z)-8:], binary.LittleEndian.Uint32(z[len(z)-8:])^1)
	if _, err := readBytes(z); !errors.Is(err, ErrDecompress) {
		t.Errorf("gzip CRC mismatch: %v, want ErrDecompress", err)
	}
	// A gzip file of something else.
	var junk bytes.Buffer
	w = stdgzip.NewWriter(&junk)
	w.Write([]byte("GET / HTTP/1.1\r\nHost: example.org\r\n\r\n"))
	w.Close()
	if _, err := readBytes(junk.Bytes()); !errors.Is(err, ErrBadMagic) || !strings.HasSuffix(err.Error(), "at offset 0 of the decompressed data") {
		t.Errorf("gzip of text: %v", err)
	}
}

// TestZstdWindowBound: a zstd frame asking for a 1 GiB window is refused
// before anything of that size is allocated.
func TestZstdWindowBound(t *testing.T) {
	c := testCaptures()["pcap"]
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 20 << 3} // no content size, window 2^(10+20)
	n := len(c.buf)
	frame = append(frame, byte(n<<3|1), byte(n>>5), byte(n>>13)) // one raw block, last
	frame = append(frame, c.buf...)
	r, err := NewReader(bytes.NewReader(frame))
	if err == nil {
		_, err = readAll(r)
	}
	if !errors.Is(err, ErrDecompress) {
		t.Fatalf("1 GiB window: %v, want ErrDecompress", err)
	}
	// The same frame with a 1 MiB window reads.
	frame[5] = 10 << 3
	got, err := readBytes(frame)
	wantEOF(t, err)
	if len(got) != len(c.want) {
		t.Fatalf("1 MiB window: %d frames", len(got))
	}
}

// TestOtherCompression: formats weir does not decompress are named, with
// the command that does.
func TestOtherCompression(t *testing.T) {
	c := testCaptures()["pcap"]
	xz := compressWith(t, "xz", c.buf)
	_, err := readBytes(xz)
	if !errors.Is(err, ErrCompression) || !strings.Contains(err.Error(), "xz -dc FILE | weir capture --read -") {
		t.Fatalf("xz: %v", err)
	}
	for _, head := range [][]byte{[]byte("BZh91AY&SY"), {0x04, 0x22, 0x4d, 0x18, 0, 0}} {
		if _, err := readBytes(head); !errors.Is(err, ErrCompression) {
			t.Errorf("%x: %v", head, err)
		}
	}
}
