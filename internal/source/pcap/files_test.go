package pcap

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
)

// readFiles reads every frame of m until the first error.
func readFiles(m *Files) ([]rec, error) {
	var out []rec
	var f source.Frame
	for {
		if err := m.Next(&f); err != nil {
			return out, err
		}
		out = append(out, rec{append([]byte{}, f.Data...), f.WireLen, f.Time, f.Link, f.Iface})
	}
}

func writeTemp(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// pcapAt builds a classic pcap file (Ethernet) of n frames from second sec.
func pcapAt(sec uint32, n, seed int) ([]byte, []rec) {
	p := newPcapFile(binary.LittleEndian, 0xa1b2c3d4, 1)
	var want []rec
	for i := range n {
		p.rec(sec+uint32(i), 0, 60, payload(seed+i, 60))
		want = append(want, rec{payload(seed+i, 60), 60, int64(sec+uint32(i)) * 1e9, packet.LinkEthernet, ""})
	}
	return p.buf, want
}

// TestFiles: rotated captures of different formats and compressions are
// one stream, in the order given; frames without an interface name take
// the first file's base name, pcapng interfaces keep their own per file.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	a, wa := pcapAt(100, 3, 0)
	ng, wng := handNg(binary.LittleEndian)
	c, wc := pcapAt(2_000_000_000, 2, 50)
	paths := []string{
		writeTemp(t, dir, "trace.pcap", a),
		writeTemp(t, dir, "trace1.pcapng.gz", compressWith(t, "gzip", ng.buf)),
		writeTemp(t, dir, "trace2.zst", compressWith(t, "zstd", c, "-q")),
	}
	m, err := OpenFiles(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	got, err := readFiles(m)
	wantEOF(t, err)
	var want []rec
	for _, w := range [][]rec{wa, wng, wc} {
		for _, r := range w {
			if r.iface == "" || r.iface == "dflt" {
				r.iface = "trace" // the first file's name
			}
			want = append(want, r)
		}
	}
	checkRecs(t, got, want)
	s := m.Stats()
	if s.Files != 3 || s.Packets != uint64(len(want)) || s.Bytes != uint64(len(a)+len(ng.buf)+len(c)) || s.Compression != "zstd" || s.Format != FormatPcap {
		t.Errorf("stats %+v", s)
	}
	if len(m.OutOfOrder()) != 0 {
		t.Errorf("out of order: %v", m.OutOfOrder())
	}
	if err := m.Next(&source.Frame{}); !errors.Is(err, io.EOF) {
		t.Errorf("Next after the end: %v", err)
	}
}

// TestFilesOutOfOrder: a file whose first frame is older than the last of
// the file before it is named (given out of order, its flows would be cut
// by the timeouts); its frames are still read.
func TestFilesOutOfOrder(t *testing.T) {
	dir := t.TempDir()
	a, _ := pcapAt(100, 3, 0)
	b, _ := pcapAt(101, 2, 10) // starts before a's last frame (102)
	c, _ := pcapAt(200, 1, 20)
	paths := []string{writeTemp(t, dir, "a.pcap", a), writeTemp(t, dir, "b.pcap", b), writeTemp(t, dir, "c.pcap", c)}
	m, err := OpenFiles(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	got, err := readFiles(m)
	wantEOF(t, err)
	if len(got) != 6 || len(m.OutOfOrder()) != 1 || m.OutOfOrder()[0] != paths[1] {
		t.Fatalf("%d frames, out of order %v", len(got), m.OutOfOrder())
	}
}

// TestFilesErrors: an error names the file it is in, after every frame
// before it was read; names that cannot be opened fail before any reading.
func TestFilesErrors(t *testing.T) {
	dir := t.TempDir()
	a, wa := pcapAt(10, 2, 0)
	b, _ := pcapAt(20, 3, 10)
	good := writeTemp(t, dir, "a.pcap", a)
	cut := writeTemp(t, dir, "b.pcap.gz", compressWith(t, "gzip", b[:len(b)-7]))
	m, err := OpenFiles([]string{good, cut, good}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readFiles(m)
	if !errors.Is(err, ErrTruncated) || !strings.HasPrefix(err.Error(), cut+": ") {
		t.Fatalf("err %v, want ErrTruncated naming %s", err, cut)
	}
	if len(got) != len(wa)+2 {
		t.Fatalf("%d frames before the error, want %d", len(got), len(wa)+2)
	}
	m.Close()

	if _, err := OpenFiles([]string{good, filepath.Join(dir, "missing.pcap")}, nil); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing.pcap") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := OpenFiles([]string{good, dir}, nil); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: %v", err)
	}
	if _, err := OpenFiles([]string{"-", good, "-"}, strings.NewReader("")); !errors.Is(err, ErrStdinTwice) {
		t.Errorf("stdin twice: %v", err)
	}
	if _, err := OpenFiles(nil, nil); err == nil {
		t.Error("no paths accepted")
	}
	bad := writeTemp(t, dir, "notes.txt", []byte("these are not the packets you are looking for"))
	if _, err := OpenFiles([]string{bad}, nil); !errors.Is(err, ErrBadMagic) || !strings.HasPrefix(err.Error(), bad+": ") {
		t.Errorf("not a capture: %v", err)
	}
}

// TestFilesStdin: standard input, compressed or not, alone or between
// files; its frames are named "stdin" when it comes first.
func TestFilesStdin(t *testing.T) {
	dir := t.TempDir()
	a, wa := pcapAt(10, 2, 0)
	b, wb := pcapAt(20, 3, 10)
	file := writeTemp(t, dir, "after.pcap", b)
	for _, z := range []bool{false, true} {
		in := a
		if z {
			in = compressWith(t, "gzip", a)
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() { pw.Write(in); pw.Close() }()
		m, err := OpenFiles([]string{"-", file}, pr)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readFiles(m)
		wantEOF(t, err)
		var want []rec
		for _, r := range append(append([]rec{}, wa...), wb...) {
			r.iface = StdinName
			want = append(want, r)
		}
		checkRecs(t, got, want)
		m.Close()
		pr.Close()
	}
}
