package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/query"
)

// gzipMin is the body size from which answers are compressed for clients
// that accept it.
const gzipMin = 4 << 10

// send writes body with its type, gzip-compressed when large and accepted.
func send(rw http.ResponseWriter, req *http.Request, contentType string, body []byte) {
	h := rw.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-store")
	h.Add("Vary", "Accept-Encoding")
	if len(body) >= gzipMin && acceptsGzip(req) {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed) // a valid level: no error
		_, _ = zw.Write(body)                            // into memory: no error
		_ = zw.Close()
		body = b.Bytes()
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if req.Method != http.MethodHead {
		_, _ = rw.Write(body) // a client gone away is its own problem
	}
}

// acceptsGzip reports whether the request's Accept-Encoding names gzip
// (quality values other than 0 are taken as yes).
func acceptsGzip(req *http.Request) bool {
	for _, v := range req.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(coding), "gzip") && strings.ReplaceAll(params, " ", "") != "q=0" {
				return true
			}
		}
	}
	return false
}

func sendJSON(rw http.ResponseWriter, req *http.Request, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		writeError(rw, &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()})
		return
	}
	send(rw, req, "application/json", append(b, '\n'))
}

// handleQuery answers GET /api/v1/query in the JSON of 'weir query -o json'.
func (s *Server) handleQuery(rw http.ResponseWriter, req *http.Request) *Error {
	q, live, e := parseQuery(req.URL.Query(), s.cfg.Now())
	if e != nil {
		return e
	}
	q.Workers = s.cfg.QueryWorkers
	ctx, cancel := context.WithTimeout(req.Context(), s.cfg.QueryTimeout)
	defer cancel()
	queued := time.Now()
	release, e := s.acquire(ctx)
	if e != nil {
		return e
	}
	start := time.Now()
	res, err := s.cfg.Backend.Query(ctx, q, live)
	release()
	ran := time.Since(start)
	s.stats.queryTime(ran)
	if err != nil {
		return s.fail(ctx, err)
	}
	if len(res.Rows) > s.cfg.MaxRows {
		s.stats.reject("too_large")
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Param: "limit",
			Message: "the answer has " + strconv.Itoa(len(res.Rows)) + " rows, more than this server returns (" + strconv.Itoa(s.cfg.MaxRows) +
				"): give a limit, a narrower time range or a condition"}
	}
	encode := time.Now()
	var b bytes.Buffer
	if err := res.Write(&b, query.JSON); err != nil {
		return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
	}
	serverTiming(rw, timing{"queue", start.Sub(queued)}, timing{"query", ran}, timing{"encode", time.Since(encode)})
	send(rw, req, "application/json", b.Bytes())
	return nil
}

// serverTiming sets the Server-Timing header (name, duration pairs) so a
// browser's Resource Timing splits a request into the server's wait for a
// query slot, its work, and the rest (network, the browser).
func serverTiming(rw http.ResponseWriter, ts ...timing) {
	var b []byte
	for i, t := range ts {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, t.name...)
		b = append(b, ";dur="...)
		b = strconv.AppendFloat(b, float64(t.d.Microseconds())/1000, 'f', 1, 64)
	}
	rw.Header().Set("Server-Timing", string(b))
}

// timing is one Server-Timing metric: a step and how long it took.
type timing struct {
	name string
	d    time.Duration
}

// handleLive answers GET /api/v1/live: the live flows as JSON lines
// (docs/record.md), largest first, as a capture's /flows/live; limit
// keeps the first n.
func (s *Server) handleLive(rw http.ResponseWriter, req *http.Request) *Error {
	v := req.URL.Query()
	for k := range v {
		if k != "limit" {
			return badParam(k, "unknown parameter %q; /api/v1/live takes limit", k)
		}
	}
	limit := 0
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			return badParam("limit", "limit %q: want a number of flows, 0 or more (0: all)", l)
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(req.Context(), s.cfg.QueryTimeout)
	defer cancel()
	queued := time.Now()
	release, e := s.acquire(ctx)
	if e != nil {
		return e
	}
	start := time.Now()
	recs, err := s.cfg.Backend.Live(ctx)
	release()
	serverTiming(rw, timing{"queue", start.Sub(queued)}, timing{"live", time.Since(start)})
	if err != nil {
		return s.fail(ctx, err)
	}
	if limit > 0 && len(recs) > limit {
		recs = recs[:limit]
	}
	var b []byte
	for i := range recs {
		b = append(format.AppendJSON(b, &recs[i]), '\n')
	}
	send(rw, req, "application/x-ndjson", b)
	return nil
}

// meta is the body of /api/v1/meta.
type meta struct {
	Version    string `json:"version"`
	Backend    string `json:"backend"`
	Attributes struct {
		Group          []string            `json:"group"`
		Condition      []string            `json:"condition"`
		ConditionNames []string            `json:"condition_names"`
		Presets        map[string][]string `json:"presets"`
	} `json:"attributes"`
	Sort []string `json:"sort"`
	*Holdings
	Limits struct {
		MaxQueries     int     `json:"max_queries"`
		QueryTimeoutMS float64 `json:"query_timeout_ms"`
		MaxRows        int     `json:"max_rows"`
	} `json:"limits"`
}

// handleMeta answers GET /api/v1/meta: the attributes the query language
// knows and what the backend holds.
func (s *Server) handleMeta(rw http.ResponseWriter, req *http.Request) *Error {
	if len(req.URL.Query()) > 0 {
		return badParam("", "/api/v1/meta takes no parameters")
	}
	ctx, cancel := context.WithTimeout(req.Context(), s.cfg.QueryTimeout)
	defer cancel()
	start := time.Now()
	m, err := s.meta(ctx)
	if err != nil {
		return s.fail(ctx, err)
	}
	serverTiming(rw, timing{"holdings", time.Since(start)})
	sendJSON(rw, req, m)
	return nil
}

// meta is /api/v1/meta's answer.
func (s *Server) meta(ctx context.Context) (*meta, error) {
	h, err := s.cfg.Backend.Holdings(ctx)
	if err != nil {
		return nil, err
	}
	m := meta{Version: s.cfg.Version, Backend: s.cfg.Backend.Name(), Holdings: h,
		Sort: []string{"bytes", "packets", "flows", "drop_packets", "drop_bytes"}}
	m.Attributes.Group = query.GroupAttributes()
	m.Attributes.Condition = query.ConditionAttributes()
	m.Attributes.ConditionNames = query.ConditionAliases()
	m.Attributes.Presets = map[string][]string{}
	for name, attrs := range query.Presets {
		for _, a := range attrs {
			m.Attributes.Presets[name] = append(m.Attributes.Presets[name], a.String())
		}
	}
	m.Limits.MaxQueries, m.Limits.MaxRows = s.cfg.MaxQueries, s.cfg.MaxRows
	m.Limits.QueryTimeoutMS = float64(s.cfg.QueryTimeout.Milliseconds())
	return &m, nil
}

// inlineMeta is the <script> data block of /api/v1/meta's answer that
// index.html carries when Config.InlineMeta is set (the console reads it
// as its meta), or nil when the backend cannot say (the page then asks
// /api/v1/meta and shows its error). json.Marshal escapes <, > and &, so
// no value can end the element.
func (s *Server) inlineMeta(req *http.Request) []byte {
	ctx, cancel := context.WithTimeout(req.Context(), s.cfg.QueryTimeout)
	defer cancel()
	m, err := s.meta(ctx)
	if err != nil {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return slices.Concat([]byte(`<script id="weir-meta" type="application/json">`), b, []byte("</script>\n"))
}

func (s *Server) handleHealth(rw http.ResponseWriter, req *http.Request) *Error {
	sendJSON(rw, req, map[string]string{"status": "ok"})
	return nil
}

// handleReady answers 200 when the backend can answer queries, else 503.
func (s *Server) handleReady(rw http.ResponseWriter, req *http.Request) *Error {
	ctx, cancel := context.WithTimeout(req.Context(), 5*time.Second)
	defer cancel()
	if err := s.cfg.Backend.Ready(ctx); err != nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "not ready: " + err.Error()}
	}
	sendJSON(rw, req, map[string]string{"status": "ready"})
	return nil
}

func (s *Server) handleOpenAPI(rw http.ResponseWriter, req *http.Request) *Error {
	send(rw, req, "application/json", openAPI)
	return nil
}
