//go:build linux

package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/sink"
)

// ipfixTCP accepts one IPFIX-over-TCP connection on loopback and counts
// the messages in it until the exporter closes it.
func ipfixTCP(t *testing.T) (addr string, messages <-chan int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	got := make(chan int, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
		r := bufio.NewReader(c)
		var hdr [16]byte
		n := 0
		for {
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				got <- n
				return
			}
			size := int(binary.BigEndian.Uint16(hdr[2:4]))
			if binary.BigEndian.Uint16(hdr[:2]) != 10 || size < 16 {
				got <- -n - 1
				return
			}
			if _, err := io.CopyN(io.Discard, r, int64(size-16)); err != nil {
				got <- n
				return
			}
			n++
		}
	}()
	return l.Addr().String(), got
}

// queueLine parses a --stats "sink queue" line.
func queueLine(t *testing.T, stderr, name string) (written, dropped, lost int) {
	t.Helper()
	m := regexp.MustCompile(`sink queue  ` + regexp.QuoteMeta(name) + `: ([\d,]+) records written, ([\d,]+) dropped(?:, ([\d,]+) lost at shutdown)?`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no sink queue line for %s:\n%s", name, stderr)
	}
	num := func(s string) int { n, _ := strconv.Atoi(strings.ReplaceAll(s, ",", "")); return n }
	return num(m[1]), num(m[2]), num(m[3])
}

// statCount reads the number after prefix in --stats output.
func statCount(t *testing.T, stderr, prefix string) int {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(prefix) + `\s*([\d,]+)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no %q in:\n%s", prefix, stderr)
	}
	n, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
	return n
}

// checkReplayDelivers runs a replay of synthetic traffic into -o json,
// the store in dir and an IPFIX-over-TCP collector, and checks that the
// JSON output and the export got every record whatever the store did; it
// returns the exit code, stderr and the number of records.
func checkReplayDelivers(t *testing.T, dir string, spec string) (code int, stderr string, flows int) {
	t.Helper()
	addr, msgs := ipfixTCP(t)
	start := time.Now()
	code, out, errs := runCLI("capture", "--synthetic", spec, "-o", "json", "--stats",
		"--data-dir", dir, "--writeout", "1s", "--export", "ipfix+tcp://"+addr)
	flows = statCount(t, errs, "\nrecords")
	t.Logf("replay of %d records took %v", flows, time.Since(start))
	if lines := strings.Count(out, "\n"); lines != flows {
		t.Errorf("JSON output has %d records, want all %d", lines, flows)
	}
	var recs, sent int
	i := strings.Index(errs, "export: ")
	if i < 0 {
		t.Fatalf("no export line:\n%s", errs)
	}
	if _, err := fmt.Sscanf(errs[i:], "export: %d records in %d IPFIX messages", &recs, &sent); err != nil {
		t.Fatalf("export line: %v\n%s", err, errs)
	}
	if got := <-msgs; recs != flows || got != sent || !strings.Contains(errs[i:], " 0 records undelivered, 0 send errors") {
		t.Errorf("export: %d records in %d messages, the collector read %d messages; want all %d records delivered\n%s", recs, sent, got, flows, errs)
	}
	if w, d, _ := queueLine(t, errs, "json"); w != flows || d != 0 {
		t.Errorf("json queue: %d written, %d dropped; want %d, 0", w, d, flows)
	}
	return code, errs, flows
}

// TestReplayFailingStore: in file replay a store whose every write fails
// (slowly, as on a full disk) holds up neither the JSON output nor the
// IPFIX export: both get every record; what the store's queue cannot take
// is dropped and counted under sink "store" (internal/sink's
// TestQueueBlockFailingSinkDoesNotStall shows it is not waited for), and
// the store's error ends the run with exit status 1.
func TestReplayFailingStore(t *testing.T) {
	storeFault = func(s sink.Sink) sink.Sink { return &faultySink{mode: "fail", inner: s} }
	t.Cleanup(func() { storeFault = nil })
	code, errs, flows := checkReplayDelivers(t, filepath.Join(t.TempDir(), "data"), "flows=40000,packets=80000")
	if code != exitFailure || !strings.Contains(errs, errInjected.Error()) {
		t.Errorf("exit %d; want 1 and the store's error\n%s", code, errs)
	}
	w, d, l := queueLine(t, errs, "store")
	if w+d+l != flows || !strings.Contains(errs, "failed writes") {
		t.Errorf("store queue: %d written, %d dropped, %d lost; want failed writes, adding up to %d\n%s", w, d, l, flows, errs)
	}
	t.Logf("store queue: %d written (and failed), %d dropped", w, d)
}

// TestReplayFullDisk: the same with the real store on a 256 KiB tmpfs
// (root): the disk fills, the error says so, and JSON and IPFIX get
// everything.
func TestReplayFullDisk(t *testing.T) {
	dir := smallTmpfs(t, "256k")
	code, errs, _ := checkReplayDelivers(t, filepath.Join(dir, "data"), "flows=60000,packets=120000")
	if code != exitFailure || !strings.Contains(errs, "no space left on device") {
		t.Errorf("exit %d; want 1 and ENOSPC named\n%s", code, errs)
	}
}

// smallTmpfs mounts a tmpfs of size on a temporary directory (root only;
// skipped elsewhere, never in CI) and unmounts it at the end.
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("mounting a tmpfs needs root: %v", err)
		}
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// weirProc is a weir process a test started; one goroutine waits for it.
type weirProc struct {
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	done           chan struct{} // closed when it has exited
	err            error         // cmd.Wait's, once done is closed
}

var (
	asWeirOnce sync.Once
	asWeirBin  string
	asWeirErr  error
)

// asWeir builds this package's test binary without the race detector and
// without cgo, once: run with WEIR_TEST_AS_WEIR=1 it is weir with the
// store faults of TestMain, and times like a real weir (the race
// detector's would not say anything about weir's own deadlines).
func asWeir(t *testing.T) string {
	t.Helper()
	asWeirOnce.Do(func() {
		dir, err := os.MkdirTemp("", "weir-test-bin-")
		if err != nil {
			asWeirErr = err
			return
		}
		asWeirBin = filepath.Join(dir, "weir.test")
		build := exec.Command("go", "test", "-c", "-o", asWeirBin, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			asWeirErr = fmt.Errorf("go test -c: %v\n%s", err, out)
		}
	})
	if asWeirErr != nil {
		t.Fatal(asWeirErr)
	}
	return asWeirBin
}

// weirProcess starts the test binary as weir (see TestMain and asWeir)
// with the store fault.
func weirProcess(t *testing.T, fault string, args ...string) *weirProc {
	t.Helper()
	p := &weirProc{cmd: exec.Command(asWeir(t), args...), stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "WEIR_TEST_AS_WEIR=1", "WEIR_TEST_STORE_FAULT="+fault)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.done })
	return p
}

// waitFor polls cond every 20 ms for up to limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool, extra func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s%s", limit, what, extra())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sigtermWithin sends SIGTERM and checks the process exits within 5 s.
func sigtermWithin(t *testing.T, p *weirProc) error {
	t.Helper()
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("exit took %v after SIGTERM, want ≤ 5 s", took)
		} else {
			t.Logf("exited %v after SIGTERM", took)
		}
		return p.err
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30 s after SIGTERM:\n%s", p.stderr.String())
	}
	return nil
}

// TestCollectHungStore: weir collect with a store that hangs in its first
// write still prints every record as JSON (the store has a queue of its
// own); SIGTERM ends it within 5 s, and what the store never took is
// counted as lost and said on stderr.
func TestCollectHungStore(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := weirProcess(t, "hang", "collect", "--listen", "tcp://"+addr, "-o", "json", "--stats",
		"--metrics-addr", "off", "--data-dir", filepath.Join(t.TempDir(), "data"))
	stdout, stderr := p.stdout, p.stderr
	waitFor(t, 20*time.Second, "the collector to listen", func() bool { return strings.Contains(stderr.String(), "listening on tcp") }, stderr.String)
	code, _, errs := runCLI("capture", "--synthetic", "flows=20000,packets=40000", "-o", "none", "--stats", "--export", "ipfix+tcp://"+addr)
	if code != exitOK || !strings.Contains(errs, "0 records undelivered") {
		t.Fatalf("exporter: exit %d\n%s", code, errs)
	}
	flows := statCount(t, errs, "export:")
	waitFor(t, 30*time.Second, fmt.Sprintf("%d records on stdout", flows), func() bool { return strings.Count(stdout.String(), "\n") >= flows },
		func() string {
			return fmt.Sprintf(": %d so far\n%s", strings.Count(stdout.String(), "\n"), stderr.String())
		})
	err = sigtermWithin(t, p)
	errs = p.stderr.String()
	if err == nil || p.cmd.ProcessState.ExitCode() != exitFailure {
		t.Errorf("exit %v; want status 1 (records were lost)", err)
	}
	if n := strings.Count(stdout.String(), "\n"); n != flows {
		t.Errorf("%d JSON records, want %d", n, flows)
	}
	w, d, lost := queueLine(t, errs, "store")
	if lost == 0 || w+d+lost != flows || !strings.Contains(errs, fmt.Sprintf("sink store: sink did not finish in time: %d records it had not taken are lost", lost)) {
		t.Errorf("store queue: %d written, %d dropped, %d lost; want losses adding up to %d, said on stderr:\n%s", w, d, lost, flows, errs)
	}
}

// TestReplayHungStoreSIGTERM: file replay waits for a store that is slow
// but not failing (nothing may be dropped) — here one that hangs in its
// first write, so the replay soon blocks on the store's full queue;
// SIGTERM still ends it within 5 s, and the records the store never took
// are counted as lost and said.
func TestReplayHungStoreSIGTERM(t *testing.T) {
	// A 5 ms idle timeout in 4 s of synthetic traffic: records all along.
	p := weirProcess(t, "hang", "capture", "--synthetic", "flows=20000,packets=4000000", "--idle-timeout", "5ms", "-o", "none", "--stats",
		"--data-dir", filepath.Join(t.TempDir(), "data"))
	time.Sleep(time.Second)
	select {
	case <-p.done:
		t.Fatalf("replay ended on its own:\n%s", p.stderr.String())
	default:
	}
	err := sigtermWithin(t, p)
	errs := p.stderr.String()
	if err == nil || p.cmd.ProcessState.ExitCode() != exitFailure {
		t.Errorf("exit %v; want status 1", err)
	}
	w, d, lost := queueLine(t, errs, "store")
	if w != 0 || d != 0 || lost == 0 || !strings.Contains(errs, fmt.Sprintf("%d records it had not taken are lost", lost)) {
		t.Errorf("store queue: %d written, %d dropped, %d lost; want every record lost, said on stderr, none dropped (replay waits):\n%s", w, d, lost, errs)
	}
}
