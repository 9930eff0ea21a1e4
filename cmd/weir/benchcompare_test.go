package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/bench/profile"
	"github.com/weir-dev/weir/internal/bench/result"
)

func writeRun(t *testing.T, dir, name string, rate float64) string {
	t.Helper()
	r := &result.Run{Schema: result.Schema, WeirVersion: "test", Started: time.Now(), Elapsed: time.Second,
		Profile: &profile.Profile{Name: "stream"},
		Txns:    []result.TxnStats{{Group: 0, Txn: 1, Latency: result.Latency{Count: 100, Avg: time.Millisecond, P50: time.Millisecond, P99: 2 * time.Millisecond}, Bytes: uint64(rate), BytesPerSec: rate, OpsPerSec: 100}}}
	for i := range 10 {
		r.Intervals = append(r.Intervals, result.Interval{Start: time.Duration(i) * 100 * time.Millisecond, Len: 100 * time.Millisecond, Bytes: uint64(rate / 10)})
	}
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := r.Write(f); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBenchCompare(t *testing.T) {
	dir := t.TempDir()
	a, b := writeRun(t, dir, "a.json", 1e9), writeRun(t, dir, "b.json", 1.5e9)
	html := filepath.Join(dir, "r.html")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"bench", "compare", a, b, "--html", html}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "throughput") || !strings.Contains(stdout.String(), "+50.0%") || !strings.Contains(stdout.String(), "better") {
		t.Errorf("table:\n%s", stdout.String())
	}
	page, err := os.ReadFile(html)
	if err != nil || !bytes.Contains(page, []byte(`id="chart-throughput"`)) {
		t.Errorf("html: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"schema": 9}`), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{a}, exitUsage, "at least two"},
		{[]string{a, filepath.Join(dir, "none.json")}, exitFailure, "none.json"},
		{[]string{a, bad}, exitFailure, "schema 9"},
		{[]string{a, html}, exitFailure, "r.html"},
	} {
		stderr.Reset()
		if code := run(append([]string{"bench", "compare"}, c.args...), &stdout, &stderr); code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, %q", c.args, code, stderr.String())
		}
	}
}
