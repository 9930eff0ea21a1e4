package agent

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"

	"github.com/weir-dev/weir/internal/httpauth"
	"github.com/weir-dev/weir/internal/metrics"
)

// HTTP is the agent's listener: /metrics, and the producer's routes (the
// live capture's /flows/live), behind the token and TLS of 'weir serve'
// (internal/httpauth).
type HTTP struct {
	Addr      string // host:port; "" or "off": no listener
	Public    bool   // allow a non-loopback Addr (then TokenFile is required)
	TokenFile string // bearer token file
	CertFile  string // PEM certificate: serve HTTPS (with KeyFile)
	KeyFile   string
}

// listener is an open HTTP listener, not serving yet.
type listener struct {
	ln       *httpauth.Listener
	loopback bool
}

// listen opens the listener (nil when Addr is off). Mistakes in the
// flags are ErrUsage; a port in use is a run failure.
func (h *HTTP) listen() (*listener, error) {
	if h.Addr == "off" || h.Addr == "" {
		if h.TokenFile != "" || h.CertFile != "" || h.KeyFile != "" {
			return nil, usagef("--api-token-file and --api-tls-* need --metrics-addr")
		}
		return nil, nil
	}
	host, _, err := net.SplitHostPort(h.Addr)
	loopback := err == nil && httpauth.IsLoopback(host)
	if err == nil && !h.Public && !loopback {
		return nil, usagef("--metrics-addr %s is not a loopback address (127.0.0.0/8, ::1, localhost); metrics and live flows reveal who talks to whom: "+
			"pass --metrics-public and --api-token-file to serve them on other addresses", h.Addr)
	}
	ln, err := httpauth.Listen(httpauth.Config{Addr: h.Addr, TokenFile: h.TokenFile, CertFile: h.CertFile, KeyFile: h.KeyFile})
	switch {
	case errors.Is(err, httpauth.ErrTokenRequired):
		return nil, usagef("--metrics-addr: %v (Prometheus sends it with authorization.credentials_file)", err)
	case errors.Is(err, httpauth.ErrBadToken):
		return nil, usagef("--api-token-file: %v", err)
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("--metrics-addr: %w (another weir running? pick another port or 'off')", err)
	case err != nil:
		return nil, usagef("--metrics-addr/--api-tls-*: %v", err)
	}
	return &listener{ln: ln, loopback: loopback}, nil
}

// serve serves reg and routes on l until the server is closed.
func (l *listener) serve(reg *metrics.Registry, routes ...metrics.Route) (*metrics.Server, error) {
	guard := httpauth.Middleware(l.ln.Token, metrics.Handler(reg, routes...), OpenOnLoopback(l.loopback))
	if err := reg.Register(guard.Collector()); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return metrics.ServeHandler(l.ln, guard), nil
}

// OpenOnLoopback is what a loopback listener serves without the token:
// /metrics (for local scrapers) and the index page; nothing off loopback.
func OpenOnLoopback(loopback bool) func(*http.Request) bool {
	return func(req *http.Request) bool {
		return loopback && (req.URL.Path == "/metrics" || req.URL.Path == "/")
	}
}
