//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/bench/result"
	"github.com/weir-dev/weir/internal/testhost"
)

// benchRun runs the built weir's 'bench run' and returns its result file.
func benchRun(t *testing.T, bin string, args ...string) (*result.Run, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "result.json")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"bench", "run", "--json", out}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("weir bench run %v: %v\n%s\n%s", args, err, stdout.String(), stderr.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := result.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return r, stdout.String()
}

// writeProfile writes a YAML profile into a temporary file.
func writeProfile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const streamYAML = `name: stream
groups:
  - nthreads: 2
    transactions:
      - iterations: 1
        flowops:
          - {op: connect, protocol: tcp}
      - duration: 1s
        flowops:
          - {op: write, size: 64k, count: 4}
      - iterations: 1
        flowops:
          - {op: disconnect}
`

const rrYAML = `name: rr
groups:
  - name: tcp-rr
    nthreads: 2
    transactions:
      - iterations: 1
        flowops:
          - {op: connect, protocol: tcp, nodelay: true}
      - duration: 1s
        flowops:
          - {op: write, size: 64}
          - {op: read, size: 1024}
      - iterations: 1
        flowops:
          - {op: disconnect}
  - name: udp-rr-v6-multus
    nthreads: 1
    transactions:
      - iterations: 1
        flowops:
          - {op: connect, protocol: udp, family: ipv6, network: secondary}
      - duration: 1s
        flowops:
          - {op: sendto, size: 200}
          - {op: recvfrom, size: 200}
      - iterations: 1
        flowops:
          - {op: disconnect}
`

// A stream profile: tables on stdout, the JSON with profile, host facts,
// weir's version, per-op and per-NIC figures that agree with each other.
func TestBenchRunStream(t *testing.T) {
	testhost.Skip(t)
	bin := buildWeir(t)
	r, out := benchRun(t, bin, writeProfile(t, "stream.yaml", streamYAML))
	for _, want := range []string{"stream", "write", "connect", "NIC", "CPU"} {
		if !strings.Contains(out, want) {
			t.Errorf("tables lack %q:\n%s", want, out)
		}
	}
	if r.Profile.Name != "stream" || r.WeirVersion == "" || r.Host.CPUs == 0 || r.Host.Kernel == "" || len(r.Conns) != 2 || len(r.Errors) > 0 {
		t.Fatalf("result: profile %q version %q host %+v, %d conns, errors %v", r.Profile.Name, r.WeirVersion, r.Host, len(r.Conns), r.Errors)
	}
	var sent uint64
	for _, c := range r.Conns {
		sent += c.FwdData
	}
	w := r.Ops[1]
	if w.Kind != "write" || w.Bytes != sent || w.Latency.Count != sent/65536 || w.BytesPerSec <= 0 || r.Txns[1].Wall < 900*time.Millisecond {
		t.Errorf("write op %+v, txn %+v, sent %d", w, r.Txns[1], sent)
	}
	var rx uint64
	for _, n := range r.NICs {
		if n.Host == "server" {
			rx = n.RxBytes
		}
	}
	if rx < sent || r.CPU[0].Percent <= 0 || r.CPU[1].Percent <= 0 {
		t.Errorf("server NIC received %d bytes for %d sent; cpu %+v", rx, sent, r.CPU)
	}
}

// A request-response profile (TCP, and UDP over IPv6 on the second
// network) with weir's capture in three modes beside it: every connection's
// packets and bytes as sent, --strict passes.
func TestBenchRunObserve(t *testing.T) {
	testhost.Skip(t)
	testhost.Need(t, "ethtool", "ethtool")
	testhost.Need(t, "nft", "nftables")
	bin := buildWeir(t)
	r, out := benchRun(t, bin, "--observe", "afpacket,ebpf,conntrack", "--strict", "--pairs", "2", writeProfile(t, "rr.yaml", rrYAML))
	if len(r.Observe) != 3 || !r.Options.Secondary || r.Options.Offloads {
		t.Fatalf("observe %+v, options %+v", r.Observe, r.Options)
	}
	for _, o := range r.Observe {
		if !o.OK || o.Conns != 6 || o.Matched != 6 || o.NICPkts == 0 || o.SeenPkts != o.NICPkts {
			t.Errorf("%s: %+v", o.Mode, o)
		}
	}
	if !strings.Contains(out, "conntrack") {
		t.Errorf("no observe table:\n%s", out)
	}
	for _, tx := range r.Txns {
		if tx.Txn == 1 && (tx.Latency.Count < 100 || tx.Latency.P99 < tx.Latency.P50) {
			t.Errorf("rr transaction %+v", tx)
		}
	}
}

// A uperf XML profile as the Ripsaw operator renders it (unquoted
// attributes, version=1.0, $h): stream, 4 threads, 16 KiB writes, unchanged.
func TestBenchRunUperfXML(t *testing.T) {
	testhost.Skip(t)
	bin := buildWeir(t)
	r, _ := benchRun(t, bin, "testdata/bench/ripsaw-stream-tcp-16384-4.xml")
	if r.Profile.Groups[0].Threads != 4 || len(r.Conns) != 4 || len(r.Errors) > 0 {
		t.Fatalf("%d threads, %d conns, errors %v", r.Profile.Groups[0].Threads, len(r.Conns), r.Errors)
	}
	for _, o := range r.Ops {
		if o.Kind == "write" && (o.Latency.Count == 0 || o.Latency.Count%16 != 0 || o.Bytes != o.Latency.Count*16384) {
			t.Errorf("write %+v", o)
		}
	}
}

// --calibrate: iperf3 and sockperf run on the same hosts in the same run,
// weir's driver in their shapes beside them, all four figures present.
func TestBenchRunCalibrate(t *testing.T) {
	testhost.Skip(t)
	testhost.Need(t, "iperf3", "iperf3")
	testhost.Need(t, "sockperf", "sockperf")
	bin := buildWeir(t)
	r, out := benchRun(t, bin, "--calibrate", "--calibrate-time", "1s", writeProfile(t, "stream.yaml", strings.Replace(streamYAML, "duration: 1s", "duration: 300ms", 1)))
	c := r.Calibrate
	if c == nil || c.Iperf3 == nil || c.Sockperf == nil || len(c.Errors) > 0 {
		t.Fatalf("calibration %+v", c)
	}
	if c.Iperf3.BitsPerSec <= 0 || c.Iperf3.WeirBitsPerSec <= 0 || c.Iperf3.Ratio <= 0 || c.Sockperf.AvgRTT <= 0 || c.Sockperf.WeirAvgRTT <= 0 || c.Sockperf.WeirP99RTT < c.Sockperf.WeirP50RTT {
		t.Errorf("iperf3 %+v sockperf %+v", c.Iperf3, c.Sockperf)
	}
	if !strings.Contains(out, "iperf3 TCP stream") || !strings.Contains(out, "sockperf udp ping-pong") {
		t.Errorf("no calibration table:\n%s", out)
	}
}

// Two real runs compared: the table and the HTML report with its charts
// (TestHTMLInChromium in internal/bench/report opens such a page).
func TestBenchRunCompare(t *testing.T) {
	testhost.Skip(t)
	bin := buildWeir(t)
	prof := writeProfile(t, "rr.yaml", strings.ReplaceAll(strings.Split(rrYAML, "  - name: udp-rr-v6-multus")[0], "duration: 1s", "duration: 500ms"))
	dir := t.TempDir()
	var files []string
	for i := range 2 {
		r, _ := benchRun(t, bin, prof)
		f := filepath.Join(dir, fmt.Sprintf("run%d.json", i))
		if err := r.WriteFile(f); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	html := filepath.Join(dir, "report.html")
	out, err := exec.Command(bin, "bench", "compare", "--html", html, files[0], files[1]).CombinedOutput()
	if err != nil {
		t.Fatalf("compare: %v\n%s", err, out)
	}
	for _, want := range []string{"throughput", "g0/t1 tcp-rr latency p99", "ΔB", "CPU server"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("compare table lacks %q:\n%s", want, out)
		}
	}
	page, _ := os.ReadFile(html)
	for _, id := range []string{"chart-throughput", "chart-latency", "chart-timeline"} {
		if !bytes.Contains(page, []byte(`id="`+id+`"`)) {
			t.Errorf("report lacks %s", id)
		}
	}
}
