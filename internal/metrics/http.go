package metrics

import (
	"compress/gzip"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ContentType is the Content-Type of the text exposition format 0.0.4.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// DefaultAddr is where weir serves its metrics unless told otherwise.
// Listeners are opened by internal/httpauth (loopback, token, TLS).
const DefaultAddr = "127.0.0.1:9464"

// bodies holds copies of renderings being sent, so a slow client does not
// hold the registry's lock while its response is written.
var bodies = sync.Pool{New: func() any { return new([]byte) }}

// gzips holds gzip writers: each one carries about a megabyte of compressor
// state, too much to allocate per scrape.
var gzips = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // the level is valid: no error
	return zw
}}

// ServeHTTP serves the registry's metrics to GET and HEAD requests (405
// otherwise), gzip-compressed when the request's Accept-Encoding allows it.
func (r *Registry) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	h := rw.Header()
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(rw, "method not allowed: use GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	bp := bodies.Get().(*[]byte)
	defer bodies.Put(bp)
	r.mu.Lock()
	r.render()
	*bp = append((*bp)[:0], r.out...)
	r.mu.Unlock()
	body := *bp

	h.Set("Content-Type", ContentType)
	h.Set("Cache-Control", "no-store")
	h.Add("Vary", "Accept-Encoding")
	if !acceptsGzip(req.Header.Values("Accept-Encoding")) {
		h.Set("Content-Length", strconv.Itoa(len(body)))
		if req.Method == http.MethodGet {
			_, _ = rw.Write(body) // a client gone away is its own problem
		}
		return
	}
	h.Set("Content-Encoding", "gzip")
	if req.Method == http.MethodHead {
		return
	}
	zw := gzips.Get().(*gzip.Writer)
	defer gzips.Put(zw)
	zw.Reset(rw)
	if _, err := zw.Write(body); err == nil {
		_ = zw.Close()
	}
	zw.Reset(nil) // drop the reference to rw before pooling
}

// acceptsGzip reports whether an Accept-Encoding header lists gzip (or *)
// with a non-zero quality.
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			coding = strings.TrimSpace(coding)
			if !strings.EqualFold(coding, "gzip") && coding != "*" {
				continue
			}
			q := 1.0
			for p := range strings.SplitSeq(params, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
					if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
						q = f
					}
				}
			}
			if q > 0 {
				return true
			}
		}
	}
	return false
}

// Server is a running metrics HTTP server.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
	err  error // Serve's result, valid once done is closed
}

// Route is one more endpoint for Serve, such as a capture's live flows.
type Route struct {
	Pattern string // http.ServeMux pattern, e.g. "GET /flows/live"
	Handler http.Handler
}

// Serve serves r on l in a new goroutine until Close: Handler(r, routes...)
// with ServeHandler's timeouts.
func Serve(l net.Listener, r *Registry, routes ...Route) *Server {
	return ServeHandler(l, Handler(r, routes...))
}

// Handler routes /metrics to the registry, / to a small page linking to
// it, then any extra routes; anything else 404.
func Handler(r *Registry, routes ...Route) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", r)
	mux.HandleFunc("/{$}", index)
	for _, rt := range routes {
		mux.Handle(rt.Pattern, rt.Handler)
	}
	return mux
}

// ServeHandler serves h on l in a new goroutine until Close. The server
// has timeouts, so a stalled client cannot hold a connection forever.
func ServeHandler(l net.Listener, h http.Handler) *Server {
	s := &Server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       60 * time.Second,
			MaxHeaderBytes:    16 << 10,
		},
		ln:   l,
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		s.err = s.srv.Serve(l)
	}()
	return s
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server: the listener and every connection are closed at
// once. It returns the error that stopped serving, if it was not Close.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	if s.err != nil && !errors.Is(s.err, http.ErrServerClosed) {
		return s.err
	}
	return err
}

const indexPage = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>weir</title></head>
<body><h1>weir</h1><p><a href="/metrics">metrics</a></p></body></html>
`

// index serves the root page.
func index(rw http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		rw.Header().Set("Allow", "GET, HEAD")
		http.Error(rw, "method not allowed: use GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	rw.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = rw.Write([]byte(indexPage))
}
