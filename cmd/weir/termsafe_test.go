package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/craft"
	"github.com/weir-dev/weir/internal/source/pcap"
	"github.com/weir-dev/weir/internal/termsafe"
)

// hostileIface sets the window title, clears the screen and reverses
// what follows: the names a hostile capture file or exporter can give.
const hostileIface = "\x1b]0;owned\x07\x1b[2J\x1b[Heth\u202e0"

// escapedIface is how every table prints it.
const escapedIface = `\x1b]0;owned\a\x1b[2J\x1b[Heth\u202e0`

// writeHostileCapture writes craft's scenario with its first interface
// renamed to hostileIface.
func writeHostileCapture(t *testing.T) string {
	t.Helper()
	frames, _ := craft.Scenario(7)
	var buf bytes.Buffer
	w, err := pcap.NewNgWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for i, ifc := range craft.ScenarioIfaces {
		name := ifc.Name
		if i == 0 {
			name = hostileIface
		}
		if ids[ifc.Name], err = w.AddInterface(name, ifc.Link, 65535); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range frames {
		if err := w.WritePacket(ids[f.Iface], f.Time, f.WireLen, f.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "hostile.pcapng")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTerminalSafety: an interface name with an OSC title, a clear-screen
// and a bidi override comes out inert in every table weir prints it in
// (capture's top-N and streaming tables, query's table and --list), and in
// everything on stderr; the escaped name is there to read.
func TestTerminalSafety(t *testing.T) {
	path := writeHostileCapture(t)
	data := filepath.Join(t.TempDir(), "data")
	for _, args := range [][]string{
		{"capture", "--read", path, "-o", "table", "--stats", "--data-dir", data},
		{"capture", "--read", path, "-o", "table", "--top", "0"},
		{"query", "-d", data, "iface"},
		{"query", "-d", data, "iface,sip", "iface != eth1"},
		{"query", "-d", data, "--list"},
		{"query", "-d", data, "-i", hostileIface + ",nosuch", "--list"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != exitOK {
			t.Fatalf("weir %q: exit %d\n%s", args, code, errb.String())
		}
		if !termsafe.Inert(out.String()) || !termsafe.Inert(errb.String()) {
			t.Errorf("weir %q: output is not inert:\nstdout %q\nstderr %q", args, out.String(), errb.String())
		}
		if !strings.Contains(out.String(), escapedIface) {
			t.Errorf("weir %q: the escaped name is missing:\n%s", args, out.String())
		}
	}
	// A message naming a file from the command line: escaped too.
	var out, errb bytes.Buffer
	if code := run([]string{"capture", "--read", filepath.Join(t.TempDir(), "no\x1b[2Jfile")}, &out, &errb); code == exitOK {
		t.Fatal("a missing file should fail")
	}
	if !termsafe.Inert(errb.String()) || !strings.Contains(errb.String(), `no\x1b[2Jfile`) {
		t.Errorf("error message not escaped: %q", errb.String())
	}
}
