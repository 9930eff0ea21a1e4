// Package testfleet starts the real Kafka broker and ClickHouse server of
// scripts/cluster.sh for a test, in the test's temporary directory, and
// stops them when the test ends. Without Java, mvn or the clickhouse-server
// package the test is skipped with a clear message, except under CI=true,
// where it fails: CI installs them (scripts/deps.sh test).
//
// WEIR_FLEET=DIR makes Start use the cluster.sh directory DIR instead (it
// starts what is not running there and leaves it running at the end): how
// scripts/bench.sh runs several benchmarks on one fleet without paying a
// broker's start-up for each.
package testfleet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Fleet is a running cluster.sh directory.
type Fleet struct {
	t          testing.TB
	dir        string
	script     string
	Kafka      string // HOST:PORT of the broker ("" when not started)
	ClickHouse string // http://HOST:PORT of the server ("" when not started)
	shared     bool   // WEIR_FLEET's: never stopped by a test
}

// What to start.
const (
	Kafka      = 1
	ClickHouse = 2
	// Private starts a fleet of the test's own even when WEIR_FLEET names
	// a shared one: for tests that stop or kill a server, which would
	// break every other user of a shared fleet.
	Private = 4
)

// Start starts what (Kafka, ClickHouse or both, or'ed) and registers their
// stop with t.Cleanup.
func Start(t testing.TB, what int) *Fleet {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if why := Missing(what); why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the local fleet cannot run under CI: %s (scripts/deps.sh test installs it)", why)
		}
		t.Skipf("skipped: %s (scripts/deps.sh fleet installs it; under CI=true this fails)", why)
	}
	f := &Fleet{t: t, script: filepath.Join(root, "scripts", "cluster.sh")}
	if what&Private == 0 {
		f.dir = os.Getenv("WEIR_FLEET")
	}
	what &^= Private
	shared := f.dir != ""
	f.shared = shared
	if !shared {
		f.dir = t.TempDir()
	}
	args := []string{"--no-setup"}
	switch what {
	case Kafka:
		args = append(args, "--only", "kafka")
	case ClickHouse:
		args = append(args, "--only", "clickhouse")
	}
	t.Cleanup(func() {
		if shared {
			return // WEIR_FLEET's owner stops it
		}
		if _, err := f.run("down", f.dir); err != nil {
			t.Errorf("stopping the fleet: %v", err)
		}
	})
	out, err := f.run(append([]string{"up", f.dir}, args...)...)
	if err != nil {
		t.Fatalf("starting the fleet: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "KAFKA="); ok {
			f.Kafka = v
		}
		if v, ok := strings.CutPrefix(sc.Text(), "CLICKHOUSE="); ok {
			f.ClickHouse = v
		}
	}
	if (what&Kafka != 0 && f.Kafka == "") || (what&ClickHouse != 0 && f.ClickHouse == "") {
		t.Fatalf("cluster.sh up printed no address: %s", out)
	}
	return f
}

// Dir is the fleet's state directory (logs under kafka/ and clickhouse/).
func (f *Fleet) Dir() string { return f.dir }

// StopKafka stops the broker (SIGTERM, as an operator's restart would).
func (f *Fleet) StopKafka() {
	f.t.Helper()
	f.own("StopKafka")
	if _, err := f.run("down", f.dir, "kafka"); err != nil {
		f.t.Fatalf("stopping kafka: %v", err)
	}
}

// KillKafka kills the broker with SIGKILL, as a crash would (its log is
// recovered at the next start), and waits until it is gone.
func (f *Fleet) KillKafka() {
	f.t.Helper()
	f.own("KillKafka")
	b, err := os.ReadFile(filepath.Join(f.dir, "kafka", "pid"))
	if err != nil {
		f.t.Fatalf("killing kafka: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		f.t.Fatalf("killing kafka: pid file says %q", b)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		f.t.Fatalf("killing kafka (pid %d): %v", pid, err)
	}
	for i := 0; i < 300 && running(pid); i++ { // bounded: 30 s
		time.Sleep(100 * time.Millisecond)
	}
	if running(pid) {
		f.t.Fatalf("kafka (pid %d) still runs 30 s after SIGKILL", pid)
	}
}

// running reports whether pid is a process that has not exited (a zombie
// waiting for its reaper has).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// StartKafka starts the broker again on its port, with its data.
func (f *Fleet) StartKafka() {
	f.t.Helper()
	if _, err := f.run("up", f.dir, "--no-setup", "--only", "kafka"); err != nil {
		f.t.Fatalf("starting kafka: %v", err)
	}
}

// run runs cluster.sh, bounded in time, and returns its standard output;
// its standard error goes to the test log on failure.
func (f *Fleet) run(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute) // a first run fetches Kafka's jars
	defer cancel()
	cmd := exec.CommandContext(ctx, f.script, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("cluster.sh %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// Missing says what the fleet lacks on this machine to start what, or "".
func Missing(what int) string {
	var why []string
	if what&Kafka != 0 {
		if _, err := exec.LookPath("java"); err != nil {
			why = append(why, "java is not installed")
		}
		root, _ := repoRoot()
		cached, _ := filepath.Glob(filepath.Join(root, "build", "kafka", "*", "libs", ".complete"))
		if _, err := exec.LookPath("mvn"); err != nil && len(cached) == 0 {
			why = append(why, "mvn is not installed and no Kafka jars are cached under build/kafka")
		}
	}
	if what&ClickHouse != 0 {
		if _, err := os.Stat("/usr/sbin/clickhouse-server"); err != nil {
			if _, err := exec.LookPath("clickhouse-server"); err != nil {
				why = append(why, "the clickhouse-server package is not installed")
			}
		}
	}
	if _, err := exec.LookPath("ss"); err != nil {
		why = append(why, "ss (iproute2) is not installed")
	}
	return strings.Join(why, "; ")
}

// repoRoot is the directory holding go.mod, above the working directory.
func repoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for range 20 {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		d = filepath.Dir(d)
	}
	return "", errors.New("testfleet: no go.mod above the working directory")
}

// own fails the test when f is a shared fleet (WEIR_FLEET): what would
// stop its servers must start with Private.
func (f *Fleet) own(what string) {
	f.t.Helper()
	if f.shared {
		f.t.Fatalf("testfleet: %s on the shared fleet WEIR_FLEET=%s: start with testfleet.Private", what, f.dir)
	}
}

// StopClickHouse stops the ClickHouse server (SIGTERM, as an operator's
// restart would) and waits until it is gone.
func (f *Fleet) StopClickHouse() {
	f.t.Helper()
	f.own("StopClickHouse")
	if _, err := f.run("down", f.dir, "clickhouse"); err != nil {
		f.t.Fatalf("stopping clickhouse: %v", err)
	}
}

// StartClickHouse starts the ClickHouse server again on its port, with
// its data.
func (f *Fleet) StartClickHouse() {
	f.t.Helper()
	if _, err := f.run("up", f.dir, "--no-setup", "--only", "clickhouse"); err != nil {
		f.t.Fatalf("starting clickhouse: %v", err)
	}
}
