package pcap

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/packet"
)

// Files from Writer and NgWriter, read by Wireshark's own code: packet
// count, wire and captured lengths, nanosecond timestamps and interface
// names must come out as written.
func TestWiresharkReadsOurFiles(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tshark not installed; run scripts/deps.sh: CI must not skip the independent cross-check")
		}
		t.Skip("tshark not installed; run scripts/deps.sh")
	}
	dir := t.TempDir()
	type pkt struct {
		iface      int
		ts         int64
		wire, capt int
	}
	pkts := []pkt{{0, t0, 60, 60}, {1, t0 + 1, 1514, 96}, {0, 1_000_000_000, 1, 1}, {1, t0 + 999_999_999 - 123_456_789, 300, 299}, {0, t0 + 5e9, 9000, 1514}}

	var pc bytes.Buffer
	w, _ := NewWriter(&pc, packet.LinkEthernet, 0)
	var ng bytes.Buffer
	nw, _ := NewNgWriter(&ng)
	nw.AddInterface("eth0", packet.LinkEthernet, 0)
	nw.AddInterface("wg0", packet.LinkRaw, 0)
	var wantPcap, wantNg []string
	names := []string{"eth0", "wg0"}
	for i, p := range pkts {
		data := payload(i, p.capt)
		if p.iface == 1 {
			data[0] = 0x45 // make the raw-IP frame look like IPv4, as on a real wg0
		}
		if err := w.WritePacket(p.ts, p.wire, data); err != nil {
			t.Fatal(err)
		}
		if err := nw.WritePacket(p.iface, p.ts, p.wire, data); err != nil {
			t.Fatal(err)
		}
		epoch := fmt.Sprintf("%d.%09d", p.ts/1e9, p.ts%1e9)
		wantPcap = append(wantPcap, fmt.Sprintf("%d\t%d\t%s", p.wire, p.capt, epoch))
		wantNg = append(wantNg, fmt.Sprintf("%d\t%d\t%s\t%s", p.wire, p.capt, epoch, names[p.iface]))
	}
	w.Flush()
	nw.Flush()

	for _, c := range []struct {
		file   string
		data   []byte
		fields []string
		want   []string
	}{
		{"w.pcap", pc.Bytes(), []string{"frame.len", "frame.cap_len", "frame.time_epoch"}, wantPcap},
		{"w.pcapng", ng.Bytes(), []string{"frame.len", "frame.cap_len", "frame.time_epoch", "frame.interface_name"}, wantNg},
	} {
		path := filepath.Join(dir, c.file)
		if err := os.WriteFile(path, c.data, 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"-n", "-r", path, "-T", "fields"} // -n: no name resolution, no network
		for _, f := range c.fields {
			args = append(args, "-e", f)
		}
		cmd := exec.Command(tshark, args...)
		cmd.Env = append(os.Environ(), "HOME="+dir) // keep tshark's profile out of the real home
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: tshark: %v\n%s", c.file, err, stderr.String())
		}
		got := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s: tshark printed\n%s\nwant\n%s", c.file, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
		if capinfos, err := exec.LookPath("capinfos"); err == nil {
			out, err := exec.Command(capinfos, "-c", "-M", "-T", "-r", path).Output()
			if err != nil {
				t.Fatalf("%s: capinfos: %v", c.file, err)
			}
			// Tab-separated, no header: "file\tcount".
			if want := fmt.Sprintf("%s\t%d", path, len(pkts)); strings.TrimSpace(string(out)) != want {
				t.Errorf("%s: capinfos printed %q, want %q", c.file, out, want)
			}
		}
	}
}
