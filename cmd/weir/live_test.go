//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/testhost"
)

// buildWeir builds the binary into a directory anyone may read and run,
// without cgo as 'make build' does: it drops its capabilities for real.
func buildWeir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "weir-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "weir")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLiveSIGTERM: weir captures a test host's interface; traffic flows;
// SIGTERM flushes the flows still live with reason shutdown and exact
// counts, metrics are served on the host's loopback, and weir exits 0.
// Meanwhile 'weir query --live' sees the live flows, and afterwards the
// store holds exactly the records printed.
func TestLiveSIGTERM(t *testing.T) {
	pr := testhost.NewPair(t)
	bin := buildWeir(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	cmd, stdout, stderr := startLive(t, pr.B, bin, "-o", "json", "--stats", "--filter", "udp", "--workers", "2", "--data-dir", dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n, size, port = 500, 300, 43210
	for _, v6 := range []bool{false, true} {
		if sent, recv, err := testhost.SendUDP(ctx, pr.A, pr.B, v6, port, n, size); err != nil || sent != n || recv != n {
			t.Fatalf("SendUDP: %d/%d: %v", sent, recv, err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // one expiry tick: the workers publish their counters

	body := scrape(t, pr.B, "/metrics")
	vals, err := metrics.ParseText(strings.NewReader(body))
	if err != nil {
		t.Fatalf("metrics: %v\n%s", err, body)
	}
	iface := fmt.Sprintf("{iface=%q}", pr.B.Iface)
	if got := vals["weir_capture_packets_total"+iface]; got != 2*n {
		t.Errorf("weir_capture_packets_total%s = %v, want %d (only UDP passes the filter)", iface, got, 2*n)
	}
	if got := vals["weir_capture_workers"]; got != 2 {
		t.Errorf("weir_capture_workers = %v, want 2", got)
	}
	if got := vals["weir_flow_active"]; got != 2 {
		t.Errorf("weir_flow_active = %v, want 2", got)
	}
	// The live flows endpoint (what weir query --live reads) has both.
	var live []jsonRecord
	for _, line := range strings.Split(strings.TrimSpace(scrape(t, pr.B, "/flows/live")), "\n") {
		var r jsonRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("/flows/live line %q: %v", line, err)
		}
		live = append(live, r)
	}
	if len(live) != 2 || live[0].Packets != n || live[0].EndReason != "none" || live[0].DstPort != port {
		t.Errorf("/flows/live: %+v, want the 2 UDP flows of %d packets, reason none", live, n)
	}
	// weir query --live, in the host's namespace: nothing is stored yet
	// (the writeout is 5 minutes away), the live flows are counted.
	if got := vals["weir_store_rows_written_total"]; got != 0 {
		t.Errorf("weir_store_rows_written_total = %v before the first writeout", got)
	}
	q := queryJSON(t, "ip", "netns", "exec", pr.B.Name, bin, "query", "-d", dataDir, "--live", "-o", "json", "dport")
	if len(q.Rows) != 1 || q.Rows[0].DPort != port || q.Rows[0].PacketsOut != 2*n || q.Rows[0].Flows != 2 || q.Stats.LiveRecords != 2 {
		t.Errorf("query --live: %+v, want port %d with 2 flows of %d packets, all live", q, port, n)
	}

	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("weir exited with %v\n%s", err, stderr.String())
	}
	var recs []jsonRecord
	sc := bufio.NewScanner(strings.NewReader(stdout.String()))
	for sc.Scan() {
		var r jsonRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2 (one UDP flow per family):\n%s", len(recs), stdout.String())
	}
	for _, r := range recs {
		hdr := uint64(20)
		if strings.Contains(r.SrcIP, ":") {
			hdr = 40
		}
		if r.DstPort != port || r.Packets != n || r.Bytes != n*(hdr+8+size) || r.EndReason != "shutdown" || r.Iface == nil || *r.Iface != pr.B.Iface {
			t.Errorf("record %+v: want %d packets, %d bytes to port %d, reason shutdown", r, n, n*(hdr+8+size), port)
		}
	}
	if !strings.Contains(stderr.String(), "kernel: 1,000 received, 0 dropped") {
		t.Errorf("--stats should show the kernel's counts for %s:\n%s", pr.B.Iface, stderr.String())
	}
	// At exit the records went to the store: the query now reads them there.
	q = queryJSON(t, bin, "query", "-d", dataDir, "-o", "json", "sip,dport")
	if len(q.Rows) != 2 || q.Stats.LiveRecords != 0 || q.Stats.RowsMatched != 2 {
		t.Fatalf("stored: %+v, want the 2 flows", q)
	}
	for _, r := range q.Rows {
		if r.DPort != port || r.PacketsOut != n || r.Flows != 1 {
			t.Errorf("stored row %+v, want %d packets to port %d", r, n, port)
		}
	}
}

// queryResult is the part of 'weir query -o json' the tests read.
type queryResult struct {
	Rows []struct {
		SIP        string `json:"sip"`
		DPort      uint16 `json:"dport"`
		PacketsOut uint64 `json:"packets_out"`
		Flows      uint64 `json:"flows"`
	}
	Stats struct {
		LiveRecords int   `json:"live_records"`
		RowsMatched int64 `json:"rows_matched"`
	}
}

// queryJSON runs a command line that ends in 'weir query ... -o json'.
func queryJSON(t *testing.T, args ...string) queryResult {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("%v: %v\n%s", args, err, ee.Stderr)
		}
		t.Fatalf("%v: %v", args, err)
	}
	var q queryResult
	if err := json.Unmarshal(out, &q); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return q
}

// startLive starts 'weir capture -i IFACE args...' in h's namespace and
// waits until it listens; the process is killed at the end of the test.
func startLive(t *testing.T, h *testhost.Host, bin string, args ...string) (*exec.Cmd, *lockedBuffer, *lockedBuffer) {
	t.Helper()
	var stdout, stderr lockedBuffer
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.Name, bin, "capture", "-i", h.Iface}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "listening on 1 interfaces") {
		if time.Now().After(deadline) {
			t.Fatalf("weir did not start: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd, &stdout, &stderr
}

// TestLiveQueryPending: a flow that went idle has left the capture's table
// but waits for the store's next writeout; 'weir query --live' still
// counts it, exactly once.
func TestLiveQueryPending(t *testing.T) {
	pr := testhost.NewPair(t)
	bin := buildWeir(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	startLive(t, pr.B, bin, "-o", "none", "--filter", "udp", "--idle-timeout", "1s", "--data-dir", dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n, size, port = 200, 100, 43211
	if sent, recv, err := testhost.SendUDP(ctx, pr.A, pr.B, false, port, n, size); err != nil || sent != n || recv != n {
		t.Fatalf("SendUDP: %d/%d: %v", sent, recv, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for { // until the flow is evicted (idle) into the store's buffer
		vals, err := metrics.ParseText(strings.NewReader(scrape(t, pr.B, "/metrics")))
		if err != nil {
			t.Fatal(err)
		}
		if vals["weir_flow_active"] == 0 && vals[`weir_flow_records_total{reason="idle"}`] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the flow was not evicted: %v", vals)
		}
		time.Sleep(200 * time.Millisecond)
	}
	q := queryJSON(t, "ip", "netns", "exec", pr.B.Name, bin, "query", "-d", dataDir, "--live", "-o", "json", "dport")
	if len(q.Rows) != 1 || q.Rows[0].DPort != port || q.Rows[0].PacketsOut != n || q.Rows[0].Flows != 1 || q.Stats.LiveRecords != 1 {
		t.Errorf("query --live: %+v, want the idle flow (%d packets to %d), from the store's buffer", q, n, port)
	}
}

// scrape fetches path from 127.0.0.1:9464 inside h's namespace. The
// socket is made on the namespace's thread (an http.Client would dial from
// another goroutine, in another namespace).
func scrape(t *testing.T, h *testhost.Host, path string) string {
	t.Helper()
	var body string
	err := h.Do(func() error {
		c, err := net.DialTimeout("tcp", "127.0.0.1:9464", 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.0\r\nHost: localhost\r\n\r\n"); err != nil {
			return err
		}
		b, err := io.ReadAll(c)
		if err != nil {
			return err
		}
		head, rest, ok := strings.Cut(string(b), "\r\n\r\n")
		if !ok || !strings.HasPrefix(head, "HTTP/1.0 200") {
			return fmt.Errorf("bad response: %q", head)
		}
		body = rest
		return nil
	})
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	return body
}

// TestLiveWithoutPrivilege: as an unprivileged user, weir explains what it
// needs and exits 1.
func TestLiveWithoutPrivilege(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run weir as another user")
	}
	bin := buildWeir(t)
	cmd := exec.Command(bin, "capture", "-i", "lo", "--duration", "2s", "--metrics-addr", "off")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitFailure {
		t.Fatalf("exit %v, want %d:\n%s", err, exitFailure, out)
	}
	for _, want := range []string{"operation not permitted", "needs root or the capabilities CAP_NET_RAW", "setcap"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestLiveUsageErrors: wrong live flags are usage errors (exit 2) that say
// what is wrong, before anything is opened.
func TestLiveUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-i", "lo", "--workers", "0"}, "--workers"},
		{[]string{"-i", "lo", "--filter", "tcp prot 80"}, "--filter"},
		{[]string{"-i", "/[/"}, "-i"},
		{[]string{"-i", "lo", "--ring-block-size", "3000"}, "BlockSize"},
		{[]string{"-i", "lo", "--metrics-addr", "0.0.0.0:9464"}, "--metrics-public"},
		{[]string{"-i", "lo", "--metrics-addr", "0.0.0.0:0", "--metrics-public"}, "serves flows to the network; give --api-token-file FILE"},
		{[]string{"-i", "lo", "--metrics-addr", "127.0.0.1:0", "--api-token-file", "/nonexistent/token"}, "--api-token-file: bad token file"},
		{[]string{"-i", "lo", "--metrics-addr", "127.0.0.1:0", "--api-tls-cert", "/nonexistent/cert.pem"}, "TLS needs both --api-tls-cert and --api-tls-key"},
		{[]string{"-i", "lo", "--metrics-addr", "off", "--api-token-file", "/nonexistent/token"}, "need --metrics-addr"},
		{[]string{"--read", "x.pcap", "--api-token-file", "t"}, "need live capture"},
		{[]string{"--read", "x.pcap", "--workers", "2"}, "need live capture"},
		{[]string{"-i", "lo", "--read", "x.pcap"}, "exactly one input"},
	} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"capture"}, c.args...), &out, &errb); code != exitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d mentioning %q", c.args, code, errb.String(), exitUsage, c.want)
		}
	}
}
