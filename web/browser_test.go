//go:build linux

package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// needBrowser skips (or fails under CI=true) when Node, Chromium or the
// console's node packages are missing.
func needBrowser(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	missing := ""
	switch {
	case err != nil:
		missing = "node"
	case fileMissing("/usr/bin/chromium"):
		missing = "/usr/bin/chromium"
	case fileMissing("node_modules/playwright-core/package.json"):
		missing = "web/node_modules (npm ci)"
	}
	if missing != "" {
		msg := "browser test needs " + missing + ": run scripts/deps.sh test"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node
}

func fileMissing(p string) bool {
	_, err := os.Stat(p)
	return err != nil
}

// syncBuffer collects a child's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// run runs a command to completion within a bounded time and returns its stdout.
func run(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// topTalker asks 'weir query -o json -n 1 sip' for the top source.
func topTalker(t *testing.T, bin, dir string, args ...string) string {
	t.Helper()
	out := run(t, bin, append([]string{"query", "-d", dir, "-o", "json", "-n", "1"}, append(args, "sip")...)...)
	var res struct{ Rows []struct{ SIP string } }
	if err := json.Unmarshal(out, &res); err != nil || len(res.Rows) != 1 {
		t.Fatalf("weir query: %v %s", err, out)
	}
	return res.Rows[0].SIP
}

// serve starts 'weir serve' on the store in dir, on a free loopback port,
// stops it when the test ends, and returns its address.
func serve(t testing.TB, bin, dir string) string {
	t.Helper()
	var serveErr syncBuffer
	srv := exec.Command(bin, "serve", "--data-dir", dir, "--addr", "127.0.0.1:0")
	srv.Stderr = &serveErr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { srv.Wait(); close(served) }()
	t.Cleanup(func() {
		srv.Process.Signal(syscall.SIGTERM)
		select {
		case <-served:
		case <-time.After(20 * time.Second):
			srv.Process.Kill()
			<-served
		}
	})
	re := regexp.MustCompile(`weir serve: http://(\S+)/ `)
	var addr string
	for deadline := time.Now().Add(30 * time.Second); addr == "" && time.Now().Before(deadline); {
		if m := re.FindStringSubmatch(serveErr.String()); m != nil {
			addr = m[1]
			break
		}
		select {
		case <-served:
			t.Fatalf("weir serve exited: %s", serveErr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		t.Fatalf("weir serve did not say where it listens: %q %s", addr, serveErr.String())
	}
	return addr
}

// TestConsoleInBrowser runs web/test/console.test.mjs: Debian's Chromium,
// headless, driven by playwright-core, against 'weir serve' on a store
// built by 'weir bench gendb' with a fixed seed. The page must load
// without console errors and show the top talker 'weir query' computes on
// the same store (for the default view and for one shared time range); a
// filter must change the table and the chart; the chart and the Sankey
// must have drawn; a mistake must show the server's message under the bad
// token; a row must drill down; a shared URL must reopen the same view;
// the chart must stop where the stored flows stop; an empty store must say
// so; an interface named like markup must show as text. Screenshots and timings go to build/console/.
func TestConsoleInBrowser(t *testing.T) {
	node := needBrowser(t)
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "weir")
	run(t, "go", "build", "-o", bin, "../cmd/weir")
	dir := filepath.Join(tmp, "store")
	run(t, bin, "bench", "gendb", "--data-dir", dir, "--days", "1", "--blocks-per-day", "96", "--flows-per-block", "1000",
		"--clients", "2000", "--servers", "200", "--seed", "11", "--ifaces", "eth0,eth1", "--no-sync")
	const from, to = "2026-01-01T06:00:00Z", "2026-01-01T18:00:00Z"
	topAll := topTalker(t, bin, dir)
	topDay := topTalker(t, bin, dir, "-f", from, "-t", to)

	addr := serve(t, bin, dir)
	empty := filepath.Join(tmp, "empty") // what a new user serves before a capture has written
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	emptyAddr := serve(t, bin, empty)
	// Names come from the network: an interface named like markup must show as text, in the table and the tooltip.
	const hostileName = `<img src=x onerror="window.__pwned=1">`
	hostile := filepath.Join(tmp, "hostile")
	run(t, bin, "bench", "gendb", "--data-dir", hostile, "--days", "1", "--blocks-per-day", "144", "--flows-per-block", "50",
		"--seed", "5", "--ifaces", "eth0,"+hostileName, "--no-sync")
	hostileAddr := serve(t, bin, hostile)

	artifacts, err := filepath.Abs("../build/console")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var out syncBuffer
	cmd := exec.CommandContext(ctx, node, "test/console.test.mjs")
	cmd.Env = append(os.Environ(), "WEIR_URL=http://"+addr, "WEIR_EMPTY_URL=http://"+emptyAddr,
		"WEIR_HOSTILE_URL=http://"+hostileAddr, "WEIR_HOSTILE_NAME="+hostileName, "WEIR_TOP_ALL="+topAll, "WEIR_TOP_DAY="+topDay,
		"WEIR_FROM="+from, "WEIR_TO="+to, "WEIR_ARTIFACTS="+artifacts)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) } // node and its Chromium
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever is left of the group (nothing, normally)
	}
	t.Logf("top talker: %s (all), %s (%s..%s)\n%s", topAll, topDay, from, to, out.String())
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) || ctx.Err() != nil {
			t.Fatalf("browser test failed (%v); screenshots in %s", err, artifacts)
		}
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^RESULT (\{.*\})$`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatal("the browser test printed no RESULT line")
	}
	if err := os.WriteFile(filepath.Join(artifacts, "timings.json"), []byte(m[1]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
