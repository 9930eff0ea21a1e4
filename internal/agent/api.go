package agent

import (
	"context"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/api"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/httpauth"
	"github.com/weir-dev/weir/internal/metrics"
)

// API is the HTTP API v1 and web console (docs/api.md) over the running
// agent's store and, for a live capture, its live flows: what 'weir
// serve' answers, from the same process. It uses HTTP's token and TLS.
type API struct {
	Addr    string // host:port; "": none
	Version string // weir's version, in /api/v1/meta
}

// apiListener is the API's open listener.
type apiListener struct {
	ln  *httpauth.Listener
	srv *api.Server
	hs  *http.Server
}

// listenAPI opens the API's listener (nil without an address). Off
// loopback it needs the token (httpauth.Listen).
func (cfg *Config) listenAPI() (*apiListener, error) {
	if cfg.API.Addr == "" || cfg.API.Addr == "off" {
		return nil, nil
	}
	if cfg.Sinks.Store == nil {
		return nil, usagef("--api-addr answers from the store: give --data-dir")
	}
	h := &cfg.HTTP
	ln, err := httpauth.Listen(httpauth.Config{Addr: cfg.API.Addr, TokenFile: h.TokenFile, CertFile: h.CertFile, KeyFile: h.KeyFile})
	if err != nil {
		return nil, usagef("--api-addr: %v", err)
	}
	return &apiListener{ln: ln}, nil
}

// serve answers from the open store, with the producer's live flows
// (and the store's pending records) when it has them.
func (a *apiListener) serve(o *opened, p Producer, version string) error {
	var live api.LiveFunc
	if t, ok := p.(interface {
		Top(ctx context.Context, n int) ([]flow.Record, error)
	}); ok {
		live = func(ctx context.Context) ([]flow.Record, error) {
			recs, err := t.Top(ctx, math.MaxInt)
			for _, pend := range o.pending() {
				pend(func(r *flow.Record) { recs = append(recs, *r) })
			}
			return recs, err
		}
	}
	// Without a token whoever loads the console may ask for meta: the page carries it (api.Config.InlineMeta).
	srv, err := api.New(api.Config{Backend: api.NewStoreBackend(o.store, live), QueryWorkers: 1, Version: version, InlineMeta: a.ln.Token == nil})
	if err != nil {
		return err
	}
	a.srv = srv
	guard := httpauth.Middleware(a.ln.Token, srv, apiOpen)
	a.hs = &http.Server{Handler: guard, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: api.DefaultQueryTimeout + api.DefaultQueueWait + 30*time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
	// Serve returns when close shuts the server down (http.ErrServerClosed)
	// or the listener fails, which the API's clients see: nothing to report.
	go func() { _ = a.hs.Serve(a.ln) }()
	return nil
}

// collector is the API's metrics (nil before serve).
func (a *apiListener) collector() metrics.Collector {
	if a == nil || a.srv == nil {
		return nil
	}
	return a.srv.Collector()
}

// close stops serving (requests in flight get 5 seconds); again, it
// does nothing.
func (a *apiListener) close() {
	if a == nil || a.ln == nil {
		return
	}
	defer func() { a.ln = nil }()
	if a.hs == nil {
		a.ln.Close()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if a.hs.Shutdown(ctx) != nil {
		a.hs.Close()
	}
}

// apiOpen says which requests need no token: health checks and the
// console's own files (it asks for the token, then sends it with every
// API call), as 'weir serve' does.
func apiOpen(req *http.Request) bool {
	p := req.URL.Path
	return p == "/healthz" || p == "/readyz" || !strings.HasPrefix(p, "/api/") && p != "/metrics"
}
