package httpauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/testpki"
)

const goodToken = "0123456789abcdef-weir-test-token"

func writeToken(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadToken: a good token file is read without its newline; short,
// long, binary, group- or world-writable files and directories are refused
// with ErrBadToken and a message naming the file.
func TestLoadToken(t *testing.T) {
	tok, err := LoadToken(writeToken(t, goodToken+"\n", 0o600))
	if err != nil || string(tok) != goodToken {
		t.Fatalf("good token: %q %v", tok, err)
	}
	if _, err := LoadToken(writeToken(t, goodToken, 0o644)); err != nil {
		t.Errorf("a token others may read but not write: %v", err)
	}
	for name, c := range map[string]struct {
		content string
		mode    os.FileMode
	}{
		"short":          {"abc\n", 0o600},
		"empty":          {"", 0o600},
		"world-writable": {goodToken, 0o666},
		"group-writable": {goodToken, 0o620},
		"too long":       {strings.Repeat("a", maxTokenFile+1), 0o600},
		"space inside":   {"0123456789 abcdef0123", 0o600},
		"control byte":   {"0123456789\x1babcdef0123", 0o600},
	} {
		p := writeToken(t, c.content, c.mode)
		if _, err := LoadToken(p); !errors.Is(err, ErrBadToken) || !strings.Contains(err.Error(), p) && name != "space inside" && name != "control byte" {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := LoadToken(t.TempDir()); !errors.Is(err, ErrBadToken) {
		t.Errorf("directory: %v", err)
	}
	if _, err := LoadToken(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, ErrBadToken) {
		t.Errorf("missing: %v", err)
	}
}

// TestListenRefusesOpenAddress: without a token only loopback addresses
// are served; with one, any address is.
func TestListenRefusesOpenAddress(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0", "example.com:0"} {
		if ln, err := Listen(Config{Addr: addr}); !errors.Is(err, ErrTokenRequired) || !strings.Contains(err.Error(), "--api-token-file") {
			if ln != nil {
				ln.Close()
			}
			t.Errorf("%s without a token: %v", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "127.0.0.2:0"} {
		ln, err := Listen(Config{Addr: addr})
		if err != nil {
			t.Errorf("%s: %v", addr, err)
			continue
		}
		if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
			t.Errorf("%s listens on %v", addr, ip)
		}
		ln.Close()
	}
	ln, err := Listen(Config{Addr: "0.0.0.0:0", TokenFile: writeToken(t, goodToken, 0o600)})
	if err != nil {
		t.Fatalf("all addresses with a token: %v", err)
	}
	ln.Close()
	if _, err := Listen(Config{Addr: "127.0.0.1"}); err == nil {
		t.Error("an address without a port was accepted")
	}
	if _, err := Listen(Config{Addr: "127.0.0.1:0", CertFile: "x.pem"}); err == nil {
		t.Error("a certificate without a key was accepted")
	}
}

// TestGuard: over real loopback connections, with and without TLS: open
// paths need no token, others need the right one (401 with a JSON error
// and WWW-Authenticate otherwise), and the failures are counted.
func TestGuard(t *testing.T) {
	pki := testpki.Write(t, t.TempDir())
	for _, useTLS := range []bool{false, true} {
		cfg := Config{Addr: "127.0.0.1:0", TokenFile: writeToken(t, goodToken+"\n", 0o600)}
		if useTLS {
			cfg.CertFile, cfg.KeyFile = pki.ServerCert, pki.ServerKey
		}
		ln, err := Listen(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if ln.TLS != useTLS || string(ln.Token) != goodToken {
			t.Fatalf("listener %+v", ln)
		}
		next := http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) { io.WriteString(rw, "flows") })
		g := Middleware(ln.Token, next, func(req *http.Request) bool { return req.URL.Path == "/healthz" })
		srv := &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}
		scheme := "http"
		if useTLS {
			pool := x509.NewCertPool()
			ca, _ := os.ReadFile(pki.CA)
			pool.AppendCertsFromPEM(ca)
			client.Transport = &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool}}
			scheme = "https"
		}
		base := scheme + "://" + ln.Addr().String()
		for _, c := range []struct {
			path, auth string
			code       int
			errCode    string
		}{
			{"/api/v1/query", "", 401, "missing_token"},
			{"/api/v1/query", "Basic " + goodToken, 401, "missing_token"},
			{"/api/v1/query", "Bearer wrong-token-0123456789", 401, "bad_token"},
			{"/api/v1/query", "Bearer " + goodToken[:len(goodToken)-1], 401, "bad_token"},
			{"/api/v1/query", "Bearer " + goodToken, 200, ""},
			{"/api/v1/query", "bearer " + goodToken, 200, ""},
			{"/healthz", "", 200, ""},
		} {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, base+c.path, nil)
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("tls=%v %s: %v", useTLS, c.path, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.code {
				t.Errorf("tls=%v %s %q: %d %s", useTLS, c.path, c.auth, resp.StatusCode, body)
				continue
			}
			if c.code == 401 {
				var e struct{ Error struct{ Code string } }
				if json.Unmarshal(body, &e) != nil || e.Error.Code != c.errCode || resp.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("tls=%v %q: %s %v", useTLS, c.auth, body, resp.Header)
				}
			} else if string(body) != "flows" {
				t.Errorf("tls=%v %s: %q", useTLS, c.path, body)
			}
		}
		if useTLS { // plain HTTP to the TLS listener gets nothing useful
			resp, err := client.Get("http://" + ln.Addr().String() + "/healthz")
			if err == nil {
				if resp.StatusCode == 200 {
					t.Error("plain HTTP answered on the TLS listener")
				}
				resp.Body.Close()
			}
		}
		reg := metrics.NewRegistry()
		if err := reg.Register(g.Collector()); err != nil {
			t.Fatal(err)
		}
		rec := &bodyRecorder{h: http.Header{}}
		reg.ServeHTTP(rec, &http.Request{Method: http.MethodGet, Header: http.Header{}})
		for _, want := range []string{`weir_api_auth_failures_total{reason="missing"} 2`, `weir_api_auth_failures_total{reason="invalid"} 2`} {
			if !strings.Contains(rec.b.String(), want) {
				t.Errorf("no %q in %s", want, rec.b.String())
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		srv.Shutdown(ctx)
		cancel()
	}
	// No token: everything passes (the listener is loopback).
	g := Middleware(nil, http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { rw.WriteHeader(204) }), nil)
	rec := &bodyRecorder{h: http.Header{}}
	g.ServeHTTP(rec, &http.Request{Method: http.MethodGet, Header: http.Header{}})
	if rec.code != 204 {
		t.Errorf("no token: %d", rec.code)
	}
}

type bodyRecorder struct {
	h    http.Header
	b    strings.Builder
	code int
}

func (r *bodyRecorder) Header() http.Header         { return r.h }
func (r *bodyRecorder) Write(b []byte) (int, error) { return r.b.Write(b) }
func (r *bodyRecorder) WriteHeader(c int)           { r.code = c }

// TestClientTLS: the CA file's certificates are trusted, a file without
// one is an error, and "" means the system roots.
func TestClientTLS(t *testing.T) {
	pki := testpki.Write(t, t.TempDir())
	c, err := ClientTLS(pki.CA)
	if err != nil || c.RootCAs == nil || c.MinVersion != tls.VersionTLS12 {
		t.Fatalf("ClientTLS(CA): %+v, %v", c, err)
	}
	if c, err := ClientTLS(""); err != nil || c.RootCAs != nil {
		t.Errorf("ClientTLS(\"\"): %+v, %v", c, err)
	}
	if _, err := ClientTLS(pki.ServerKey); err == nil {
		t.Error("a key file was taken for a CA")
	}
	if _, err := ClientTLS(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing file was taken for a CA")
	}
}
