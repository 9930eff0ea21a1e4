//go:build linux

package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startServe runs 'weir serve' with args and returns its base URL (read
// from the line it prints) and a function that stops it with SIGTERM and
// returns its exit code.
func startServe(t *testing.T, bin string, args ...string) (string, func() int) {
	t.Helper()
	var stderr lockedBuffer
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() int {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("weir serve did not exit within 20 s of SIGTERM\n%s", stderr.String())
		}
		return cmd.ProcessState.ExitCode()
	}
	re := regexp.MustCompile(`weir serve: (https?)://(\S+)/ `)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			_, port, err := net.SplitHostPort(m[2])
			if err != nil {
				stop()
				t.Fatal(err)
			}
			return m[1] + "://127.0.0.1:" + port, stop // over loopback, whatever it listens on
		}
		select {
		case <-done:
			t.Fatalf("weir serve exited: %s", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	t.Fatalf("weir serve did not say where it listens: %s", stderr.String())
	return "", nil
}

func httpGet(t *testing.T, url, token string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeCommand: 'weir serve' serves the console, the API and its
// metrics over a store on loopback and exits 0 at SIGTERM; it refuses an
// address other than loopback without a token, and with one it asks every
// flow-serving request for it while health checks and the console's files
// stay open; a missing store is a clear failure.
func TestServeCommand(t *testing.T) {
	dir := gendbStore(t)
	bin := buildWeir(t)
	base, stop := startServe(t, bin, "--data-dir", dir, "--addr", "127.0.0.1:0")
	for _, c := range []struct {
		path, want string
		code       int
	}{
		{"/healthz", `"ok"`, 200},
		{"/readyz", `"ready"`, 200},
		{"/", "<!doctype html>", 200},
		{"/api/v1/query?group=iface", `"iface": "eth1"`, 200},
		{"/api/v1/meta", `"backend": "store"`, 200},
		{"/api/v1/live", `"no_live"`, 404},
		{"/metrics", `weir_api_requests_total{route="query",code="200"} 1`, 200},
	} {
		code, body := httpGet(t, base+c.path, "")
		if code != c.code || !strings.Contains(strings.ToLower(body), strings.ToLower(c.want)) {
			t.Errorf("%s: %d %.300s", c.path, code, body)
		}
	}
	if code := stop(); code != exitOK {
		t.Errorf("exit code %d after SIGTERM", code)
	}

	code, _, errs := runCLI("serve", "--data-dir", dir, "--addr", "0.0.0.0:0")
	if code != exitUsage || !strings.Contains(errs, "--api-token-file") {
		t.Errorf("all addresses without a token: %d %s", code, errs)
	}
	code, _, errs = runCLI("serve", "--data-dir", dir, "--clickhouse", "http://127.0.0.1:8123")
	if code != exitUsage || !strings.Contains(errs, "without --data-dir") {
		t.Errorf("--clickhouse with --data-dir: %d %s", code, errs)
	}
	code, _, errs = runCLI("serve", "--clickhouse", "http://127.0.0.1:1", "--addr", "127.0.0.1:0") // nothing listens there
	if code != exitFailure || !strings.Contains(errs, "--clickhouse http://127.0.0.1:1") {
		t.Errorf("--clickhouse without a server: %d %s", code, errs)
	}
	code, _, errs = runCLI("serve", "--data-dir", filepath.Join(dir, "missing"))
	if code != exitFailure || !strings.Contains(errs, "no flow store") {
		t.Errorf("missing store: %d %s", code, errs)
	}

	token := "serve-test-token-0123456789"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, stop = startServe(t, bin, "--data-dir", dir, "--addr", "0.0.0.0:0", "--api-token-file", tokenFile)
	for _, c := range []struct {
		path, token string
		code        int
	}{
		{"/api/v1/query?group=sip", "", 401},
		{"/api/v1/query?group=sip", "wrong-token-0123456789", 401},
		{"/api/v1/query?group=sip", token, 200},
		{"/api/v1/meta", "", 401},
		{"/metrics", "", 401},
		{"/metrics", token, 200},
		{"/healthz", "", 200},
		{"/readyz", "", 200},
		{"/", "", 200},
	} {
		if code, body := httpGet(t, base+c.path, c.token); code != c.code {
			t.Errorf("%s with token %q: %d %.200s", c.path, c.token, code, body)
		}
	}
	if code := stop(); code != exitOK {
		t.Errorf("exit code %d after SIGTERM", code)
	}
}
