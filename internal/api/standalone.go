package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/httpauth"
	"github.com/weir-dev/weir/internal/metrics"
)

// Standalone is the API served on its own ('weir serve'): the Server and
// /metrics behind a listener that requires a token off loopback and may
// speak TLS.
type Standalone struct {
	Listener *httpauth.Listener
	hs       *http.Server
}

// ListenError is a listener that could not be opened (a usage mistake:
// the address, the token file, the certificate).
type ListenError struct{ Err error }

func (e *ListenError) Error() string { return e.Err.Error() }

func (e *ListenError) Unwrap() error { return e.Err }

// NewStandalone builds the Server over cfg.Backend, its metrics (and the
// backend's, when it has a Collector method) and the listener of lc.
// Without a token the console's page carries /api/v1/meta's answer
// (Config.InlineMeta): whoever loads the page may ask for it anyway.
func NewStandalone(cfg Config, lc httpauth.Config) (*Standalone, error) {
	cfg.InlineMeta = lc.TokenFile == ""
	srv, err := New(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := httpauth.Listen(lc)
	if err != nil {
		return nil, &ListenError{err}
	}
	reg := metrics.NewRegistry()
	mux := http.NewServeMux()
	mux.Handle("/metrics", reg)
	mux.Handle("/", srv)
	guard := httpauth.Middleware(ln.Token, mux, openWithoutToken)
	cols := []metrics.Collector{srv.Collector(), guard.Collector(), metrics.NewGoCollector(), metrics.NewProcessCollector()}
	if sb, ok := cfg.Backend.(interface{ Collector() metrics.Collector }); ok {
		cols = append(cols, sb.Collector())
	}
	for _, c := range cols {
		if err := reg.Register(c); err != nil {
			ln.Close()
			return nil, err
		}
	}
	hs := &http.Server{Handler: guard, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: srv.cfg.QueryTimeout + srv.cfg.QueueWait + 30*time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
	return &Standalone{Listener: ln, hs: hs}, nil
}

// Run serves until ctx is done, then shuts down (5 s for requests in
// flight); it returns the error that stopped serving, nil after ctx.
func (s *Standalone) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.hs.Serve(s.Listener) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.hs.Shutdown(sctx); err != nil {
		s.hs.Close()
	}
	return nil
}

// openWithoutToken says which requests need no token: health checks, and
// the console's own files (it asks for the token, then sends it with every
// API call). Flows and metrics always need it when a token is set.
func openWithoutToken(req *http.Request) bool {
	p := req.URL.Path
	return p == "/healthz" || p == "/readyz" || !strings.HasPrefix(p, "/api/") && p != "/metrics"
}

// Announce is the line 'weir serve' starts with: where it listens, over
// what (what: "store DIR", "ClickHouse URL database DB") and how clients
// authenticate (the token's file).
func (s *Standalone) Announce(what, tokenFile string) string {
	scheme, auth := "http", "no token (loopback)"
	if s.Listener.TLS {
		scheme = "https"
	}
	if s.Listener.Token != nil {
		auth = "bearer token from " + tokenFile
	}
	return fmt.Sprintf("%s://%s/ — %s, %s", scheme, s.Listener.Addr(), what, auth)
}
