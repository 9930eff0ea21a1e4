// Package api serves weir's HTTP API v1 and the web console: queries in
// exactly the JSON of 'weir query -o json', the live flows, what the
// backend holds, health and readiness, and an OpenAPI 3 document, over a
// Backend (the embedded store today; ClickHouse or a running capture's
// own tables behind the same interface).
//
// Queries are bounded: at most MaxQueries run at once (each on
// QueryWorkers goroutines), at most MaxWaiting wait for a slot, for at
// most QueueWait, and each runs for at most QueryTimeout; past those the
// answer is a JSON error (429 with Retry-After, 504), never a pile-up that
// starves a capture running in the same process.
//
// Authentication and TLS are not here: internal/httpauth wraps the
// handler (a bearer token, required off loopback).
package api

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/web"
)

// Defaults of Config.
const (
	DefaultMaxQueries   = 2
	DefaultMaxWaiting   = 16
	DefaultQueueWait    = 10 * time.Second
	DefaultQueryTimeout = 30 * time.Second
	DefaultMaxRows      = 100_000
)

// Config configures a Server.
type Config struct {
	Backend Backend // required
	// MaxQueries bounds the queries (and live listings) answered at once
	// (default DefaultMaxQueries); MaxWaiting bounds those waiting for a
	// slot (DefaultMaxWaiting), each for at most QueueWait
	// (DefaultQueueWait). Beyond either: 429 with Retry-After.
	MaxQueries, MaxWaiting int
	QueueWait              time.Duration
	// QueryTimeout bounds one request's work (default
	// DefaultQueryTimeout): past it, 504.
	QueryTimeout time.Duration
	// QueryWorkers are the goroutines one query decodes blocks on
	// (default GOMAXPROCS). A capture serving the API gives it fewer.
	QueryWorkers int
	// MaxRows bounds the rows of one answer (default DefaultMaxRows):
	// limit=0 over millions of groups is refused (413), not sent.
	MaxRows int
	// Console is the web console's files (index.html at the root);
	// default the embedded build (package web). NoConsole serves none.
	Console   fs.FS
	NoConsole bool
	// InlineMeta puts /api/v1/meta's answer into the console's index.html
	// (a JSON data block the page reads instead of asking for it): the
	// console's first query goes out without that round trip. Set it only
	// when /api/v1/meta needs no token (NewStandalone: no token file).
	InlineMeta bool
	Version    string           // weir's version, in /api/v1/meta
	Now        func() time.Time // the clock relative times use (default time.Now)
}

// Server is the API's http.Handler.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	slots   chan struct{}
	waiting atomic.Int64
	stats   *apiStats
	console *console
}

// route is one endpoint.
type route struct {
	path    string // the ServeMux pattern, without a method: GET and HEAD only
	name    string // the route label in metrics
	handler func(rw http.ResponseWriter, req *http.Request) *Error
}

// Route is one endpoint the Server answers: GET (and HEAD) of Path.
type Route struct{ Path, Name string }

// New returns a Server over cfg.Backend.
func New(cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("api: no backend")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.MaxQueries, DefaultMaxQueries)
	def(&cfg.MaxWaiting, DefaultMaxWaiting)
	def(&cfg.MaxRows, DefaultMaxRows)
	def(&cfg.QueryWorkers, runtime.GOMAXPROCS(0))
	if cfg.QueueWait <= 0 {
		cfg.QueueWait = DefaultQueueWait
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = DefaultQueryTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), slots: make(chan struct{}, cfg.MaxQueries)}
	s.stats = newStats(s)
	if !cfg.NoConsole {
		files := cfg.Console
		if files == nil {
			files = web.Assets()
		}
		c, err := newConsole(files)
		if err != nil {
			return nil, err
		}
		s.console = c
		if cfg.InlineMeta {
			c.inline = s.inlineMeta
		}
	}
	for _, r := range s.routes() {
		s.mux.Handle(r.path, s.wrap(r))
	}
	s.mux.Handle("/api/", s.wrap(route{"/api/", "other", func(_ http.ResponseWriter, req *http.Request) *Error {
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound,
			Message: "no such endpoint: " + req.URL.Path + " (GET /api/v1/openapi.json lists them)"}
	}}))
	return s, nil
}

func (s *Server) routes() []route {
	rs := []route{
		{"/api/v1/query", "query", s.handleQuery},
		{"/api/v1/topseries", "topseries", s.handleTopSeries},
		{"/api/v1/live", "live", s.handleLive},
		{"/api/v1/meta", "meta", s.handleMeta},
		{"/api/v1/openapi.json", "openapi", s.handleOpenAPI},
		{"/healthz", "healthz", s.handleHealth},
		{"/readyz", "readyz", s.handleReady},
	}
	if s.console != nil {
		rs = append(rs, route{"/", "console", s.console.serve})
	}
	return rs
}

// Routes lists the endpoints the server answers ("/" is the console and
// its files).
func (s *Server) Routes() []Route {
	var out []Route
	for _, r := range s.routes() {
		out = append(out, Route{r.path, r.name})
	}
	return out
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(rw http.ResponseWriter, req *http.Request) { s.mux.ServeHTTP(rw, req) }

// statusWriter remembers the status a handler sent.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// wrap adds what every route shares: GET and HEAD only, headers that keep
// browsers from guessing, errors as JSON, and the request counters.
func (s *Server) wrap(r route) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		sw := &statusWriter{ResponseWriter: rw}
		h := rw.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		var e *Error
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			e = &Error{Status: http.StatusMethodNotAllowed, Code: CodeMethod, Message: "method " + req.Method + " not allowed: use GET"}
		} else {
			e = r.handler(sw, req)
		}
		if e != nil {
			writeError(sw, e)
		}
		s.stats.request(r.name, sw.status)
	})
}

// acquire takes a query slot, waiting at most QueueWait, or returns busy.
func (s *Server) acquire(ctx context.Context) (release func(), e *Error) {
	release = func() { <-s.slots }
	select {
	case s.slots <- struct{}{}:
		return release, nil
	default:
	}
	busy := &Error{Status: http.StatusTooManyRequests, Code: CodeBusy,
		Message: "the server is answering as many queries as it allows; retry in a moment (Retry-After)"}
	if s.waiting.Add(1) > int64(s.cfg.MaxWaiting) {
		s.waiting.Add(-1)
		s.stats.reject("busy")
		return nil, busy
	}
	defer s.waiting.Add(-1)
	t := time.NewTimer(s.cfg.QueueWait)
	defer t.Stop()
	select {
	case s.slots <- struct{}{}:
		return release, nil
	case <-t.C:
		s.stats.reject("busy")
		return nil, busy
	case <-ctx.Done():
		return nil, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the request ended while waiting for a query slot"}
	}
}

// fail turns a backend error into an Error: a deadline is 504, a client
// gone is 503 (nobody reads it), the rest 500 with the backend's words.
func (s *Server) fail(ctx context.Context, err error) *Error {
	switch {
	case errors.Is(err, ErrNoLive):
		return &Error{Status: http.StatusNotFound, Code: CodeNoLive, Message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		s.stats.reject("timeout")
		return &Error{Status: http.StatusGatewayTimeout, Code: CodeTimeout,
			Message: "the query ran longer than the server allows (" + s.cfg.QueryTimeout.String() + "): narrow the time range, add a condition, or group by fewer attributes"}
	case errors.Is(err, context.Canceled):
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the request was cancelled"}
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
}
