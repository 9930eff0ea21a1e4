package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/weir-dev/weir/internal/httpauth"
	"github.com/weir-dev/weir/internal/metrics"
)

// httpOpts are the flags of the HTTP listener of capture and collect:
// /metrics, capture's /flows/live, behind the same token and TLS as
// 'weir serve' (internal/httpauth).
type httpOpts struct {
	addr, token, cert, key string
	public                 bool
}

func (h *httpOpts) flags(fs *flag.FlagSet, defAddr, routes string) {
	fs.StringVar(&h.addr, "metrics-addr", defAddr, "serve "+routes+" at `host:port` ('off' disables); loopback only unless --metrics-public")
	fs.BoolVar(&h.public, "metrics-public", false, "allow --metrics-addr to be a non-loopback address (then --api-token-file is required)")
	fs.StringVar(&h.token, "api-token-file", "", "require the bearer token in this `file` (16+ printable characters; clients send 'Authorization: Bearer TOKEN'): "+
		"for every endpoint off loopback, where it is required, and on loopback for all but /metrics")
	fs.StringVar(&h.cert, "api-tls-cert", "", "serve HTTPS with this PEM certificate `file` (with --api-tls-key)")
	fs.StringVar(&h.key, "api-tls-key", "", "PEM key `file` of --api-tls-cert")
}

// httpFlags are the names flags registers (live capture checks them).
var httpFlags = []string{"metrics-addr", "metrics-public", "api-token-file", "api-tls-cert", "api-tls-key"}

// openOnLoopback is what a loopback listener serves without the token:
// /metrics (for local scrapers) and the index page; nothing off loopback.
func openOnLoopback(loopback bool) func(*http.Request) bool {
	return func(req *http.Request) bool {
		return loopback && (req.URL.Path == "/metrics" || req.URL.Path == "/")
	}
}

// serve serves reg and routes at --metrics-addr behind the token and TLS
// the flags ask for (openOnLoopback says what needs no token); nothing when
// the address is "off". On failure it says why and what to do, and returns
// a non-zero exit code (the caller closes what it opened).
func (h *httpOpts) serve(stderr io.Writer, cmd string, reg *metrics.Registry, routes ...metrics.Route) (*metrics.Server, int) {
	if h.addr == "off" {
		if h.token != "" || h.cert != "" || h.key != "" {
			fmt.Fprintf(stderr, "weir %s: --api-token-file and --api-tls-* need --metrics-addr\n", cmd)
			return nil, exitUsage
		}
		return nil, exitOK
	}
	host, _, err := net.SplitHostPort(h.addr)
	if err == nil && !h.public && !httpauth.IsLoopback(host) {
		fmt.Fprintf(stderr, "weir %s: --metrics-addr %s is not a loopback address (127.0.0.0/8, ::1, localhost); metrics and live flows reveal who talks to whom: "+
			"pass --metrics-public and --api-token-file to serve them on other addresses\n", cmd, h.addr)
		return nil, exitUsage
	}
	ln, err := httpauth.Listen(httpauth.Config{Addr: h.addr, TokenFile: h.token, CertFile: h.cert, KeyFile: h.key})
	switch {
	case errors.Is(err, httpauth.ErrTokenRequired):
		fmt.Fprintf(stderr, "weir %s: --metrics-addr: %v (Prometheus sends it with authorization.credentials_file)\n", cmd, err)
		return nil, exitUsage
	case errors.Is(err, httpauth.ErrBadToken):
		fmt.Fprintf(stderr, "weir %s: --api-token-file: %v\n", cmd, err)
		return nil, exitUsage
	case errors.Is(err, syscall.EADDRINUSE):
		fmt.Fprintf(stderr, "weir %s: --metrics-addr: %v (another weir running? pick another port or 'off')\n", cmd, err)
		return nil, exitFailure
	case err != nil:
		fmt.Fprintf(stderr, "weir %s: --metrics-addr/--api-tls-*: %v\n", cmd, err)
		return nil, exitUsage
	}
	guard := httpauth.Middleware(ln.Token, metrics.Handler(reg, routes...), openOnLoopback(httpauth.IsLoopback(host)))
	if err := reg.Register(guard.Collector()); err != nil {
		ln.Close()
		fmt.Fprintf(stderr, "weir %s: metrics: %v\n", cmd, err)
		return nil, exitFailure
	}
	return metrics.ServeHandler(ln, guard), exitOK
}
