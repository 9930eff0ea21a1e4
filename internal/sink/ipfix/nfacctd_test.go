package ipfix

import (
	"encoding/csv"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/craft"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/testhost"
)

// scenarioRecords are the flows of internal/craft's scenario as records,
// and the capture's totals: packets and bytes both ways, and the
// directions that have packets.
func scenarioRecords() (recs []flow.Record, packets, bytes, fwdPackets, directions uint64) {
	_, truth := craft.Scenario(1)
	recs = make([]flow.Record, len(truth))
	for i, tr := range truth {
		recs[i] = flow.Record{Key: tr.Key, Packets: tr.Packets, Bytes: tr.Bytes, RevPackets: tr.RevPackets, RevBytes: tr.RevBytes,
			TCPFlags: tr.TCPFlags, RevTCPFlags: tr.RevTCPFlags, Start: tr.First, End: tr.Last, EndReason: tr.EndReason, Iface: tr.Iface, VLAN: tr.VLAN}
		packets, bytes, fwdPackets = packets+tr.Packets+tr.RevPackets, bytes+tr.Bytes+tr.RevBytes, fwdPackets+tr.Packets
		directions++
		if tr.Packets > 0 && tr.RevPackets > 0 {
			directions++
		}
	}
	return recs, packets, bytes, fwdPackets, directions
}

// TestNfacctd: pmacct's nfacctd (Debian) ignores RFC 5103 reverse
// elements: from weir's biflows it counts only the initiators' packets;
// with ?biflow=off it counts every packet and byte of the capture (one
// record per direction with packets).
func TestNfacctd(t *testing.T) {
	nfacctd, err := exec.LookPath("nfacctd")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("nfacctd not installed; run scripts/deps.sh: CI must not skip the interop check")
		}
		t.Skip("nfacctd (pmacct) not installed; run scripts/deps.sh")
	}
	recs, packets, bytes, fwdPackets, directions := scenarioRecords()
	if fwdPackets == packets {
		t.Fatal("no responder traffic: the test shows nothing")
	}
	for _, c := range []struct {
		opts       string
		rows, pkts uint64
		byts       uint64 // 0: not checked (biflows: the forward bytes)
	}{
		{"", uint64(len(recs)), fwdPackets, 0},
		{"?biflow=off", directions, packets, bytes},
	} {
		rows, pkts, byts := exportToNfacctd(t, nfacctd, recs, c.opts)
		if rows != c.rows || pkts != c.pkts || (c.byts != 0 && byts != c.byts) {
			t.Errorf("--export ...%s: nfacctd counted %d records, %d packets, %d bytes; want %d records, %d packets (the capture: %d packets, %d bytes)",
				c.opts, rows, pkts, byts, c.rows, c.pkts, packets, bytes)
		}
	}
}

// exportToNfacctd sends recs over UDP to an nfacctd started for the test
// (print plugin, one row per flow key) and returns the rows, packets and
// bytes it printed.
func exportToNfacctd(t *testing.T, nfacctd string, recs []flow.Record, opts string) (rows, packets, bytes uint64) {
	t.Helper()
	dir := t.TempDir()
	port := freeUDPPort(t)
	out := filepath.Join(dir, "flows.csv")
	conf := filepath.Join(dir, "nfacctd.conf")
	cfg := fmt.Sprintf("daemonize: false\nnfacctd_ip: 127.0.0.1\nnfacctd_port: %d\nplugins: print\n"+
		"aggregate: src_host, dst_host, src_port, dst_port, proto\nprint_output: csv\nprint_output_file: %s\n"+
		"print_output_file_append: true\nprint_refresh_time: 1\npidfile: %s\n", port, out, filepath.Join(dir, "pid"))
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var log testhost.SyncBuffer
	cmd := exec.Command(nfacctd, "-f", conf)
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its plugins are processes of their own: stop the group
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	for deadline := time.Now().Add(20 * time.Second); !udpBound(port); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("nfacctd did not bind 127.0.0.1:%d: %s", port, log.String())
		}
	}
	// nfacctd binds before its plugins take records: send a sentinel (an
	// address the scenario does not use)
	// record (its own domain) until it is printed, then the records.
	sentinel, err := New(Config{URL: fmt.Sprintf("ipfix+udp://127.0.0.1:%d", port), Domain: 99, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	probe := records(1)
	probe[0].Key.SrcAddr = netip.MustParseAddr("::ffff:100.64.99.1").As16()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if b, _ := os.ReadFile(out); strings.Contains(string(b), "100.64.99.1,") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nfacctd printed no record: %s", log.String())
		}
		sentinel.Write(probe)
	}
	sentinel.Close()
	x, err := New(Config{URL: fmt.Sprintf("ipfix+udp://127.0.0.1:%d%s", port, opts), Domain: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Write(recs); err != nil {
		t.Fatal(err)
	}
	x.Close()
	if st := x.Stats(); st.DroppedRecords != 0 {
		t.Fatalf("exporter stats %+v", st)
	}
	// The print plugin appends what it aggregated every second: wait until
	// the rows stop growing for 2.5 s.
	read := func() (rows, packets, bytes uint64) {
		f, err := os.Open(out)
		if err != nil {
			return 0, 0, 0
		}
		defer f.Close()
		r := csv.NewReader(f)
		r.FieldsPerRecord = -1
		lines, _ := r.ReadAll()
		for _, l := range lines {
			if len(l) < 7 || l[0] == "SRC_IP" || l[0] == "100.64.99.1" {
				continue
			}
			p, err1 := strconv.ParseUint(l[len(l)-2], 10, 64)
			b, err2 := strconv.ParseUint(l[len(l)-1], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("nfacctd row %q", l)
			}
			rows, packets, bytes = rows+1, packets+p, bytes+b
		}
		return rows, packets, bytes
	}
	last, stable := uint64(0), time.Now()
	for deadline := time.Now().Add(30 * time.Second); last == 0 || time.Since(stable) < 2500*time.Millisecond; time.Sleep(100 * time.Millisecond) {
		if n, _, _ := read(); n != last {
			last, stable = n, time.Now()
		}
		if time.Now().After(deadline) {
			break
		}
	}
	rows, packets, bytes = read()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // everything is printed: no need to wait for its slow SIGTERM
	cmd.Wait()
	return rows, packets, bytes
}
