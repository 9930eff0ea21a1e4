// Package httpauth guards weir's HTTP endpoints that serve flows: a bearer
// token read from a file, compared in constant time, required whenever the
// listener is not loopback; and optional TLS from a certificate and key
// file. Listen refuses a non-loopback address without a token, so flows
// are never published by accident.
//
// It implements the contract of issue 21 point 9 (--api-token-file,
// --api-tls-cert, --api-tls-key) for every weir HTTP listener: the API
// server's, and capture's and collect's --metrics-addr (/metrics,
// /flows/live), whose callers say with Middleware's open function what a
// loopback listener serves without the token.
package httpauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"

	"github.com/weir-dev/weir/internal/metrics"
)

// Sentinel errors.
var (
	ErrTokenRequired = errors.New("a token is required to listen on an address other than loopback")
	ErrBadToken      = errors.New("bad token file")
)

// maxTokenFile bounds the token file: a token is a line, not a document.
const maxTokenFile = 4 << 10

// minToken is the shortest token accepted: a guessable token is no guard.
const minToken = 16

// Config says how to guard a listener.
type Config struct {
	Addr      string // host:port to listen on
	TokenFile string // file holding the bearer token ("" for none: loopback only)
	CertFile  string // TLS certificate (PEM); with KeyFile, serve HTTPS
	KeyFile   string // its private key (PEM)
}

// LoadToken reads a token from path: the file's content without
// surrounding white space, printable ASCII, at least 16 bytes. A file
// others may write to is refused (anyone could set the token).
func LoadToken(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrBadToken, path)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("%w: %s can be written by other users (mode %v): chmod go-w %s", ErrBadToken, path, fi.Mode().Perm(), path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	if len(b) > maxTokenFile {
		return nil, fmt.Errorf("%w: %s is longer than %d bytes; it should hold one token", ErrBadToken, path, maxTokenFile)
	}
	tok := []byte(strings.TrimSpace(string(b)))
	if len(tok) < minToken {
		return nil, fmt.Errorf("%w: %s holds a token shorter than %d bytes (make one with: head -c 32 /dev/urandom | base64 > %s)", ErrBadToken, path, minToken, path)
	}
	for _, c := range tok {
		if c <= ' ' || c > '~' {
			return nil, fmt.Errorf("%w: %s: the token must be printable ASCII without spaces", ErrBadToken, path)
		}
	}
	return tok, nil
}

// IsLoopback reports whether host (an address literal, or localhost) is
// a loopback address. No name is resolved.
func IsLoopback(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// Listener is a guarded listener: Listen's result.
type Listener struct {
	net.Listener
	Token []byte // nil: no token (loopback only)
	TLS   bool
}

// Listen opens cfg.Addr, with TLS when a certificate is given. Without a
// token file only loopback addresses are allowed (ErrTokenRequired).
func Listen(cfg Config) (*Listener, error) {
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w (want HOST:PORT, e.g. 127.0.0.1:9470)", cfg.Addr, err)
	}
	out := &Listener{}
	if cfg.TokenFile != "" {
		if out.Token, err = LoadToken(cfg.TokenFile); err != nil {
			return nil, err
		}
	} else if !IsLoopback(host) {
		return nil, fmt.Errorf("%w: %q serves flows to the network; give --api-token-file FILE (clients send 'Authorization: Bearer TOKEN'), or listen on 127.0.0.1", ErrTokenRequired, cfg.Addr)
	}
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		return nil, errors.New("TLS needs both --api-tls-cert and --api-tls-key")
	}
	var tcfg *tls.Config
	if cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("TLS certificate: %w", err)
		}
		tcfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		out.TLS = true
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		_, port, _ := net.SplitHostPort(cfg.Addr)
		cfg.Addr = net.JoinHostPort("127.0.0.1", port) // never resolved
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	if tcfg != nil {
		ln = tls.NewListener(ln, tcfg)
	}
	out.Listener = ln
	return out, nil
}

// Guard checks bearer tokens in front of next.
type Guard struct {
	sum              [32]byte // SHA-256 of the token: compared in constant time, whatever the length
	next             http.Handler
	open             func(*http.Request) bool
	missing, invalid atomic.Uint64
}

// Middleware returns next behind token: a request without
// "Authorization: Bearer TOKEN" gets 401 with a JSON error, unless open
// says it needs none (health checks, the console's static files). A nil
// token guards nothing.
func Middleware(token []byte, next http.Handler, open func(*http.Request) bool) *Guard {
	g := &Guard{next: next, open: open}
	if token != nil {
		g.sum = sha256.Sum256(token)
	} else {
		g.open = func(*http.Request) bool { return true }
	}
	return g
}

// ServeHTTP checks the token and passes the request on.
func (g *Guard) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	if g.open != nil && g.open(req) {
		g.next.ServeHTTP(rw, req)
		return
	}
	auth := req.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		g.missing.Add(1)
		deny(rw, "missing_token", "this endpoint needs 'Authorization: Bearer TOKEN' (the token of the server's --api-token-file)")
		return
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	if subtle.ConstantTimeCompare(sum[:], g.sum[:]) != 1 {
		g.invalid.Add(1)
		deny(rw, "bad_token", "the bearer token is not the server's")
		return
	}
	g.next.ServeHTTP(rw, req)
}

func deny(rw http.ResponseWriter, code, msg string) {
	h := rw.Header()
	h.Set("WWW-Authenticate", `Bearer realm="weir"`)
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	rw.WriteHeader(http.StatusUnauthorized)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"status": 401, "code": code, "message": msg}}) // strings: no error
	_, _ = rw.Write(append(b, '\n'))
}

var descFailures = &metrics.Desc{Name: "weir_api_auth_failures_total", Type: metrics.Counter, Labels: []string{"reason"},
	Help: "Requests refused for their bearer token: missing (no Authorization header) or invalid."}

// Collector returns the guard's metrics.
func (g *Guard) Collector() metrics.Collector { return guardStats{g} }

type guardStats struct{ g *Guard }

func (s guardStats) Describe() []*metrics.Desc { return []*metrics.Desc{descFailures} }

func (s guardStats) Collect(w *metrics.Writer) {
	w.Sample(descFailures, float64(s.g.missing.Load()), "missing")
	w.Sample(descFailures, float64(s.g.invalid.Load()), "invalid")
}

// ClientTLS returns a client TLS configuration that trusts the CA
// certificates in the PEM file caFile (the system roots when caFile is
// ""): for clients of a weir endpoint with --api-tls-cert.
func ClientTLS(caFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return c, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	c.RootCAs = x509.NewCertPool()
	if !c.RootCAs.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	return c, nil
}
