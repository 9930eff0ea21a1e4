//go:build linux

package web_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/bench/profile"
	"github.com/weir-dev/weir/internal/bench/report"
	"github.com/weir-dev/weir/internal/bench/result"
	"github.com/weir-dev/weir/web"
)

// benchRun is a 'weir bench run' result moving rate bytes/s over 2 s in
// 20 intervals, its main transaction's p99 given.
func benchRun(name string, rate float64, p99 time.Duration) *result.Run {
	r := &result.Run{Schema: result.Schema, WeirVersion: "test", Started: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC),
		Elapsed: 2 * time.Second, Profile: &profile.Profile{Name: name}, ProfileFile: name + ".yaml",
		Txns: []result.TxnStats{{Group: 0, Txn: 1, Latency: result.Latency{Count: 1000, Avg: p99 / 3, P50: p99 / 4, P99: p99},
			Bytes: uint64(rate * 2), Wall: 2 * time.Second, BytesPerSec: rate, OpsPerSec: 500}}}
	for i := range 20 {
		f := 1.0 + 0.03*float64(i%3-1)
		r.Intervals = append(r.Intervals, result.Interval{Start: time.Duration(i) * 100 * time.Millisecond, Len: 100 * time.Millisecond, Bytes: uint64(rate / 10 * f)})
	}
	return r
}

// TestReportInBrowser writes a 'weir bench compare --html' report of three
// runs and opens it with web/test/report.test.mjs in Debian's Chromium
// (headless, playwright-core): it must load without console errors, in the
// console's stylesheet (its background, font and series colours, which
// only the embedded stylesheet defines), with every bar and line drawn,
// and switch to the console's dark theme. Screenshots go to
// build/console/report-*.png; the report itself to build/console/report.html.
func TestReportInBrowser(t *testing.T) {
	node := web.NeedBrowser(t)
	c := report.Compare([]*result.Run{benchRun("stream", 1.1e9, 400*time.Microsecond), benchRun("stream", 1.3e9, 350*time.Microsecond),
		benchRun("stream-observed", 0.9e9, 520*time.Microsecond)})
	var page bytes.Buffer
	if err := report.WriteHTML(&page, c); err != nil {
		t.Fatal(err)
	}
	// The stylesheet is the console's, byte for byte: the build's app.css.
	css := web.Stylesheet()
	if !bytes.Contains(page.Bytes(), append(append([]byte(`<style id="console-css">`), css...), "</style>"...)) {
		t.Fatal("the report does not embed the console's stylesheet verbatim")
	}
	var m struct{ Files map[string]string }
	b, err := os.ReadFile("dist/manifest.json")
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(css); hex.EncodeToString(sum[:]) != m.Files["app.css"] {
		t.Fatal("web.Stylesheet is not the built dist/app.css")
	}

	artifacts, err := filepath.Abs("../build/console")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(artifacts, "report.html")
	if err := os.WriteFile(file, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "test/report.test.mjs")
	cmd.Env = append(os.Environ(), "WEIR_REPORT="+file, "WEIR_ARTIFACTS="+artifacts)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) } // node and its Chromium
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever is left of the group
	}
	t.Logf("%s", out.String())
	if err != nil {
		t.Fatalf("report browser test failed (%v); screenshots in %s", err, artifacts)
	}
}
