//go:build linux

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/httpauth"
	"github.com/weir-dev/weir/internal/testhost"
	"github.com/weir-dev/weir/internal/testpki"
)

// getTLS does one HTTPS GET of path on 127.0.0.1:9464 in h's namespace
// (dialled on the namespace's thread) and returns the status line and body.
func getTLS(t *testing.T, h *testhost.Host, cfg *tls.Config, path, auth string) (status, body string) {
	t.Helper()
	err := h.Do(func() error {
		raw, err := net.DialTimeout("tcp", "127.0.0.1:9464", 5*time.Second)
		if err != nil {
			return err
		}
		c := tls.Client(raw, cfg)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		req := "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n"
		if auth != "" {
			req += "Authorization: " + auth + "\r\n"
		}
		if _, err := io.WriteString(c, req+"\r\n"); err != nil {
			return err
		}
		b, err := io.ReadAll(c)
		if err != nil && len(b) == 0 {
			return err
		}
		status, _, _ = strings.Cut(string(b), "\r\n")
		_, body, _ = strings.Cut(string(b), "\r\n\r\n")
		return nil
	})
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return status, body
}

// TestLiveAPIToken: a live capture with --api-token-file and TLS serves
// /flows/live over HTTPS to the token only, /metrics (loopback) to anyone;
// 'weir query --live' with the token and the CA reads the live flows, and
// without the token it fails saying what to give.
func TestLiveAPIToken(t *testing.T) {
	pr := testhost.NewPair(t)
	bin := buildWeir(t)
	dir := t.TempDir()
	pki := testpki.Write(t, dir)
	tok := filepath.Join(dir, "token")
	const secret = "c2VjcmV0LXRva2VuLTAxMjM0NTY3ODk="
	if err := os.WriteFile(tok, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(dir, "data")
	startLive(t, pr.B, bin, "-o", "none", "--filter", "udp", "--data-dir", dataDir,
		"--api-token-file", tok, "--api-tls-cert", pki.ServerCert, "--api-tls-key", pki.ServerKey)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n, port = 100, 43212
	if sent, recv, err := testhost.SendUDP(ctx, pr.A, pr.B, false, port, n, 100); err != nil || sent != n || recv != n {
		t.Fatalf("SendUDP: %d/%d: %v", sent, recv, err)
	}
	cfg, err := httpauth.ClientTLS(pki.CA)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerName = "127.0.0.1"
	// The ring hands the packets over when its block is retired: wait for the flow.
	waitFor(t, 10*time.Second, "the live flow", func() bool {
		_, body := getTLS(t, pr.B, cfg, "/flows/live", "Bearer "+secret)
		return strings.Contains(body, `"dst_port":43212`)
	}, func() string { return "" })
	for _, c := range []struct{ path, auth, want string }{
		{"/metrics", "", "HTTP/1.0 200"},
		{"/flows/live", "", "HTTP/1.0 401"},
		{"/flows/live", "Bearer wrong-token-0123456789", "HTTP/1.0 401"},
		{"/flows/live", "Bearer " + secret, "HTTP/1.0 200"},
	} {
		if got, _ := getTLS(t, pr.B, cfg, c.path, c.auth); !strings.HasPrefix(got, c.want) {
			t.Errorf("GET %s (%q): %q, want %s", c.path, c.auth, got, c.want)
		}
	}
	url := "https://127.0.0.1:9464/flows/live"
	q := queryJSON(t, "ip", "netns", "exec", pr.B.Name, bin, "query", "-d", dataDir, "--live", "--live-url", url,
		"--api-token-file", tok, "--api-ca", pki.CA, "-o", "json", "dport")
	if len(q.Rows) != 1 || q.Rows[0].DPort != port || q.Rows[0].PacketsOut != n || q.Stats.LiveRecords != 1 {
		t.Errorf("query --live with the token: %+v, want the live flow of %d packets to %d", q, n, port)
	}
	out, err := exec.Command("ip", "netns", "exec", pr.B.Name, bin, "query", "-d", dataDir, "--live", "--live-url", url,
		"--api-ca", pki.CA, "dport").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailure || !strings.Contains(string(out), "401 Unauthorized: the capture asks for its token: give --api-token-file") {
		t.Errorf("query --live without the token: %v\n%s", err, out)
	}
}
