package craft

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/packet"
)

// writePcap writes frames as a classic pcap file (microsecond timestamps)
// of one link type; the 24-byte file header and 16-byte record headers are
// written here so the test depends on no pcap writer.
func writePcap(t *testing.T, path string, link packet.LinkType, frames []Frame) int {
	t.Helper()
	var b []byte
	le := binary.LittleEndian
	b = le.AppendUint32(b, 0xa1b2c3d4)
	b = le.AppendUint16(b, 2)
	b = le.AppendUint16(b, 4)
	b = le.AppendUint32(b, 0) // thiszone
	b = le.AppendUint32(b, 0) // sigfigs
	b = le.AppendUint32(b, 262144)
	b = le.AppendUint32(b, uint32(link))
	n := 0
	for _, f := range frames {
		if f.Link != link {
			continue
		}
		b = le.AppendUint32(b, uint32(f.Time/1e9))
		b = le.AppendUint32(b, uint32(f.Time%1e9/1e3))
		b = le.AppendUint32(b, uint32(len(f.Data)))
		b = le.AppendUint32(b, uint32(f.WireLen))
		b = append(b, f.Data...)
		n++
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTsharkChecksums lets Wireshark's dissectors, with checksum validation
// on, judge every frame of the scenario, one pcap per link type.
func TestTsharkChecksums(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tshark not installed; run scripts/deps.sh: CI must not skip the independent cross-check")
		}
		t.Skip("tshark not installed; run scripts/deps.sh")
	}
	frames, _ := Scenario(1)
	dir := t.TempDir()
	links := []packet.LinkType{packet.LinkEthernet, packet.LinkSLL, packet.LinkSLL2, packet.LinkRaw, packet.LinkIPv4, packet.LinkIPv6}
	for _, link := range links {
		path := filepath.Join(dir, link.String()+".pcap")
		n := writePcap(t, path, link, frames)
		if n == 0 {
			t.Fatalf("no %v frames", link)
		}
		protos := []string{"ip", "tcp", "udp", "icmp", "icmpv6", "sctp"}
		args := []string{"-n", "-r", path,
			"-o", "ip.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
			"-o", "sctp.checksum:CRC-32C", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,", "-e", "frame.number"}
		for _, p := range protos {
			args = append(args, "-e", p+".checksum.status")
		}
		// Every frame must be read, and none may carry a bad checksum
		// (status 0; 1 is good, 2 unverified).
		lines := run(t, tshark, args...)
		if len(lines) != n {
			t.Fatalf("%v: tshark read %d frames, wrote %d", link, len(lines), n)
		}
		good := map[string]int{}
		for _, line := range lines {
			cols := strings.Split(line, "\t")
			for i, c := range cols[1:] {
				for _, st := range strings.Split(c, ",") {
					switch st {
					case "0":
						t.Errorf("%v: frame %s: bad %s checksum", link, cols[0], protos[i])
					case "1":
						good[protos[i]]++
					}
				}
			}
		}
		if good["tcp"]+good["udp"] == 0 || (link != packet.LinkIPv6 && good["ip"] == 0) {
			t.Errorf("%v: checksums were not verified: %v", link, good)
		}
		t.Logf("%v: %d frames, verified good checksums: %v", link, n, good)
	}
	if t.Failed() {
		return
	}
}

func run(t *testing.T, name string, args ...string) []string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr)
	}
	s := strings.TrimSpace(string(out))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
