package main

import (
	"flag"

	"github.com/weir-dev/weir/internal/agent"
)

// httpOpts are the flags of the HTTP listener of capture and collect:
// /metrics, capture's /flows/live, behind the same token and TLS as
// 'weir serve' (internal/httpauth).
type httpOpts struct {
	agent.HTTP
	api agent.API
}

func (h *httpOpts) flags(fs *flag.FlagSet, defAddr, routes string) {
	fs.StringVar(&h.Addr, "metrics-addr", defAddr, "serve "+routes+" at `host:port` ('off' disables); loopback only unless --metrics-public")
	fs.BoolVar(&h.Public, "metrics-public", false, "allow --metrics-addr to be a non-loopback address (then --api-token-file is required)")
	fs.StringVar(&h.TokenFile, "api-token-file", "", "require the bearer token in this `file` (16+ printable characters; clients send 'Authorization: Bearer TOKEN'): "+
		"for every endpoint off loopback, where it is required, and on loopback for all but /metrics")
	fs.StringVar(&h.CertFile, "api-tls-cert", "", "serve HTTPS with this PEM certificate `file` (with --api-tls-key)")
	fs.StringVar(&h.KeyFile, "api-tls-key", "", "PEM key `file` of --api-tls-cert")
	fs.StringVar(&h.api.Addr, "api-addr", "", "also serve the HTTP API v1 and web console of 'weir serve' (docs/api.md) over this run's store"+
		" and live flows at `host:port`, with the same --api-token-file and --api-tls-* (a token is required off loopback)")
	h.api.Version = version
}
