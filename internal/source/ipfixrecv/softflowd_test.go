package ipfixrecv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/craft"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/source/pcap"
)

// scenarioPcap writes the Ethernet interface's frames of craft's scenario
// to a classic pcap file in dir.
func scenarioPcap(t *testing.T, dir string) string {
	t.Helper()
	frames, _ := craft.Scenario(1)
	var buf bytes.Buffer
	w, err := pcap.NewWriter(&buf, craft.ScenarioIfaces[0].Link, 65535)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if f.Iface == craft.ScenarioIfaces[0].Name {
			if err := w.WritePacket(f.Time, f.WireLen, f.Data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "eth0.pcap")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// protoTotals are packets and octets per IP protocol.
type protoTotals map[uint8][2]uint64

// softflowdTotals parses softflowd's closing report: its "Per-protocol
// statistics" (octets, packets per protocol) and "Flows expired".
func softflowdTotals(t *testing.T, out []byte) (protoTotals, int) {
	t.Helper()
	tot := protoTotals{}
	for _, m := range regexp.MustCompile(`(?m)^\s+\S+ \((\d+)\):\s+(\d+)\s+(\d+)\s`).FindAllSubmatch(out, -1) {
		p, _ := strconv.Atoi(string(m[1]))
		oct, _ := strconv.ParseUint(string(m[2]), 10, 64)
		pk, _ := strconv.ParseUint(string(m[3]), 10, 64)
		tot[uint8(p)] = [2]uint64{pk, oct}
	}
	m := regexp.MustCompile(`Flows expired: (\d+)`).FindSubmatch(out)
	if len(tot) == 0 || m == nil {
		t.Fatalf("softflowd's report has no per-protocol statistics or flow count:\n%s", out)
	}
	flows, _ := strconv.Atoi(string(m[1]))
	return tot, flows
}

// TestSoftflowd: softflowd (a real exporter, from Debian) replays a pcap
// of craft's scenario to weir's collector as IPFIX with millisecond times
// (one-way and RFC 5103 biflow records), NetFlow v9 and v5. Every set of
// every message decodes (templates, options templates, data), nothing is
// skipped or counted as an error or a sequence gap, and the packets and
// octets per protocol equal softflowd's own closing report.
func TestSoftflowd(t *testing.T) {
	bin, err := exec.LookPath("softflowd")
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("softflowd not installed; run scripts/deps.sh: CI must not skip the interop check")
		}
		t.Skip("softflowd not installed; run scripts/deps.sh")
	}
	dir := t.TempDir()
	file := scenarioPcap(t, dir)
	first, last := time.Unix(0, craft.ScenarioStart), time.Unix(0, craft.ScenarioStart).Add(craft.ScenarioDuration)
	for _, tc := range []struct {
		name  string
		args  []string
		ipfix bool // the decoder sees templates and options
		bi    bool // one record per flow, with reverse counters
	}{
		// Times relative to the exporter's boot (-v 9, -v 5, -v 10
		// without -A) need -a: softflowd's clock follows the pcap's, so
		// flows do not start before the exporter booted.
		{"ipfix", []string{"-v", "10", "-6", "-A", "milli"}, true, false},
		{"ipfix-biflow", []string{"-v", "10", "-6", "-A", "milli", "-b"}, true, true},
		{"ipfix-uptime", []string{"-v", "10", "-6", "-a"}, true, false},
		{"v9", []string{"-v", "9", "-6", "-a"}, true, false},
		{"v5", []string{"-v", "5", "-a"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The capture is of January: its times are kept as sent (no clock skew bound).
			c, m, stop := run(t, Config{Listen: []string{"udp://127.0.0.1:0"}, Sockets: 1, MaxClockSkew: -1})
			defer stop()
			// Paths relative to dir: softflowd 1.1.0 garbles a long -r path
			// and then never reads the file.
			args := append([]string{"-d", "-r", filepath.Base(file), "-n", c.Addrs()[0].String(),
				"-p", "pid", "-c", "ctl"}, tc.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Dir = dir
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("softflowd %v: %v\n%s", args, err, out)
			}
			want, flows := softflowdTotals(t, out)
			var sent uint64
			for _, v := range want {
				sent += v[0]
			}
			// The datagrams are on loopback by now: wait until their packets
			// are all counted (or 10 s).
			var got protoTotals
			var recs []flow.Record
			for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				m.mu.Lock()
				recs = slices.Clone(m.recs)
				m.mu.Unlock()
				got = protoTotals{}
				var n uint64
				for _, r := range recs {
					v := got[r.Key.Proto]
					got[r.Key.Proto] = [2]uint64{v[0] + r.Packets + r.RevPackets, v[1] + r.Bytes + r.RevBytes}
					n += r.Packets + r.RevPackets
				}
				if n >= sent || time.Now().After(end) {
					break
				}
			}
			stop()
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("per protocol [packets octets]:\n got %v\nwant %v (softflowd's report)", got, want)
			}
			st := c.Stats()
			if st.SkippedSets != 0 || st.SequenceGaps != 0 || st.Errors != [len(st.Errors)]uint64{} {
				t.Errorf("stats %+v", st)
			}
			if tc.ipfix && (st.Templates < 2 || st.OptionsRecords == 0) {
				t.Errorf("templates %d, options records %d: want both", st.Templates, st.OptionsRecords)
			}
			if tc.bi && len(recs) != flows {
				t.Errorf("%d biflow records, softflowd expired %d flows", len(recs), flows)
			}
			var rev uint64
			for i, r := range recs {
				rev += r.RevPackets
				s, e := time.Unix(0, r.Start), time.Unix(0, r.End)
				if s.Before(first) || e.After(last) || e.Before(s) {
					t.Fatalf("record %d: times %v..%v outside the capture's %v..%v", i, s, e, first, last)
				}
				if r.Key.Proto == flow.ProtoTCP && r.TCPFlags == 0 {
					t.Fatalf("record %d: TCP without flags: %+v", i, r)
				}
			}
			if tc.bi != (rev > 0) {
				t.Errorf("reverse packets %d, biflow %v", rev, tc.bi)
			}
		})
	}
}
