package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/query"
)

// TestQueryAnswers: /api/v1/query answers what query.Run answers on the
// same store for the same question, in the same JSON (but the elapsed
// time); cmd/weir's TestServeMatchesCLI checks the same against the CLI.
func TestQueryAnswers(t *testing.T) {
	st := smallStore(t)
	_, ts := newTestServer(t, Config{})
	for _, c := range []struct{ params, group, cond string }{
		{"group=sip", "sip", ""},
		{"group=talk_conv&condition=dport+%3D+443&limit=5", "talk_conv", "dport = 443"},
		{"group=dport,proto&sort=packets:in&ascending=true", "dport,proto", ""},
		{"group=iface&iface=eth1", "iface", ""},
	} {
		code, h, body := get(t, ts, "/api/v1/query?"+c.params)
		if code != http.StatusOK || h.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %s %s", c.params, code, h.Get("Content-Type"), body)
		}
		v, _ := url.ParseQuery(c.params)
		q := &query.Query{Limit: 10}
		q.Group, _ = query.ParseGroupBy(c.group)
		q.Cond, _ = query.ParseCondition(c.cond)
		q.Sort, q.Dir, _ = query.ParseSort(v.Get("sort") + map[bool]string{true: "bytes"}[v.Get("sort") == ""])
		q.Ascending = v.Get("ascending") == "true"
		if v.Get("limit") != "" {
			q.Limit = 5
		}
		q.Ifaces = v["iface"]
		res, err := query.Run(context.Background(), st, q, nil)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := res.Write(&want, query.JSON); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(maskElapsed(body), maskElapsed(want.Bytes())) {
			t.Errorf("%s: API answered\n%s\nquery.Run\n%s", c.params, body, want.Bytes())
		}
		if len(res.Rows) == 0 {
			t.Errorf("%s: no rows: the comparison proves little", c.params)
		}
	}
}

// TestQueryErrors: every mistake is a 400 JSON error naming the parameter;
// a group-by or condition mistake carries the offsets and the caret the
// CLI prints.
func TestQueryErrors(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	for _, c := range []struct{ params, code, param, caret string }{
		{"group=sip&condition=" + url.QueryEscape("dport = 443 and dpor = 80"), CodeBadCondition, "condition", "  dport = 443 and dpor = 80\n                  ^^^^"},
		{"group=sip&condition=" + url.QueryEscape("(port 22"), CodeBadCondition, "condition", "  (port 22\n          ^"},
		{"group=sip,bogus", CodeBadGroup, "group", "  sip,bogus\n      ^^^^^"},
		{"", CodeBadRequest, "group", ""},
		{"group=sip&cond=x", CodeBadRequest, "cond", ""},
		{"group=sip&limit=-1", CodeBadRequest, "limit", ""},
		{"group=sip&limit=ten", CodeBadRequest, "limit", ""},
		{"group=sip&sort=size", CodeBadRequest, "sort", ""},
		{"group=sip&resolution=500ms", CodeBadRequest, "resolution", ""},
		{"group=sip&from=2026-01-02&to=2026-01-01", CodeBadRequest, "from", ""},
		{"group=sip&from=yesterday", CodeBadRequest, "from", ""},
		{"group=sip&live=maybe", CodeBadRequest, "live", ""},
		{"group=sip&group=dip", CodeBadRequest, "group", ""},
	} {
		code, _, body := get(t, ts, "/api/v1/query?"+c.params)
		e := apiError(t, body)
		if code != http.StatusBadRequest || e.Status != code || e.Code != c.code || e.Param != c.param || e.Message == "" {
			t.Errorf("%q: %d %+v", c.params, code, e)
			continue
		}
		if e.Caret != c.caret {
			t.Errorf("%q: caret\n%s\nwant\n%s", c.params, e.Caret, c.caret)
		}
		if c.caret != "" {
			// The offsets point at the token the caret marks.
			v, _ := url.ParseQuery(c.params)
			in := v.Get(c.param)
			if e.Input == nil || *e.Input != in || e.Pos == nil || e.End == nil || *e.Pos > len(in) || *e.End < *e.Pos {
				t.Errorf("%q: input/pos/end %v %v %v", c.params, e.Input, e.Pos, e.End)
			} else if strings.Index(strings.Split(c.caret, "\n")[1], "^")-2 != *e.Pos {
				t.Errorf("%q: pos %d does not match the caret", c.params, *e.Pos)
			}
		}
	}
	// live=true without a live source: 404 no_live.
	code, _, body := get(t, ts, "/api/v1/query?group=sip&live=true")
	if e := apiError(t, body); code != http.StatusNotFound || e.Code != CodeNoLive {
		t.Errorf("live without a capture: %d %+v", code, e)
	}
}

// TestQueryLimits: with one slot and one place to wait, a second query
// waits, a third is refused at once with 429 and Retry-After, the waiting
// one is refused when QueueWait passes; a query past QueryTimeout is a
// 504; a limit=0 answer with more than MaxRows rows is a 413. The
// counters say so.
func TestQueryLimits(t *testing.T) {
	b := &blockingBackend{started: make(chan struct{}, 4), release: make(chan struct{})}
	s, ts := newTestServer(t, Config{Backend: b, MaxQueries: 1, MaxWaiting: 1, QueueWait: 2 * time.Second, QueryTimeout: time.Minute})
	type answer struct {
		code int
		h    http.Header
		body []byte
	}
	first := make(chan answer, 1)
	go func() {
		c, h, body := get(t, ts, "/api/v1/query?group=sip")
		first <- answer{c, h, body}
	}()
	<-b.started // the first holds the slot
	second := make(chan answer, 1)
	go func() {
		c, h, body := get(t, ts, "/api/v1/query?group=sip")
		second <- answer{c, h, body}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for s.waiting.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s.waiting.Load() != 1 {
		t.Fatal("the second query never waited")
	}
	code, h, body := get(t, ts, "/api/v1/query?group=sip")
	if e := apiError(t, body); code != http.StatusTooManyRequests || e.Code != CodeBusy || h.Get("Retry-After") != "1" {
		t.Errorf("third query: %d %+v Retry-After %q", code, e, h.Get("Retry-After"))
	}
	a := <-second // refused after QueueWait
	if e := apiError(t, a.body); a.code != http.StatusTooManyRequests || e.Code != CodeBusy {
		t.Errorf("waiting query: %d %+v", a.code, e)
	}
	close(b.release)
	if a := <-first; a.code != http.StatusOK {
		t.Errorf("first query: %d %s", a.code, a.body)
	}

	// A query past its time limit.
	b2 := &blockingBackend{started: make(chan struct{}, 1), release: make(chan struct{})}
	s2, ts2 := newTestServer(t, Config{Backend: b2, QueryTimeout: 50 * time.Millisecond})
	code, _, body = get(t, ts2, "/api/v1/query?group=sip")
	if e := apiError(t, body); code != http.StatusGatewayTimeout || e.Code != CodeTimeout {
		t.Errorf("slow query: %d %+v", code, e)
	}

	// An answer larger than MaxRows.
	_, ts3 := newTestServer(t, Config{MaxRows: 5})
	code, _, body = get(t, ts3, "/api/v1/query?group=sip&limit=0")
	if e := apiError(t, body); code != http.StatusRequestEntityTooLarge || e.Code != CodeTooLarge {
		t.Errorf("large answer: %d %+v", code, e)
	}
	if code, _, _ := get(t, ts3, "/api/v1/query?group=sip&limit=5"); code != http.StatusOK {
		t.Errorf("answer of MaxRows rows: %d", code)
	}

	for _, c := range []struct {
		s    *Server
		want string
	}{
		{s, `weir_api_queries_rejected_total{reason="busy"} 2`},
		{s, `weir_api_requests_total{route="query",code="429"} 2`},
		{s, `weir_api_requests_total{route="query",code="200"} 1`},
		{s2, `weir_api_queries_rejected_total{reason="timeout"} 1`},
		{s2, `weir_api_requests_total{route="query",code="504"} 1`},
		{s2, `weir_api_query_duration_seconds_count 1`},
	} {
		if got := scrape(t, c.s); !strings.Contains(got, "\n"+c.want+"\n") {
			t.Errorf("no %q in\n%s", c.want, got)
		}
	}
}

func scrape(t *testing.T, s *Server) string {
	t.Helper()
	reg := metrics.NewRegistry()
	if err := reg.Register(s.Collector()); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	reg.ServeHTTP(rec, (&http.Request{Method: http.MethodGet, Header: http.Header{}}))
	return "\n" + rec.body.String()
}

// TestLive: /api/v1/live sends the backend's live flows as JSON lines in
// the record format, limit keeps the first; without live flows, 404.
func TestLive(t *testing.T) {
	recs := make([]flow.Record, 3)
	for i := range recs {
		flow.SetAddr4(&recs[i].Key.SrcAddr, []byte{127, 0, 0, byte(i + 1)})
		flow.SetAddr4(&recs[i].Key.DstAddr, []byte{127, 0, 0, 100})
		recs[i].Key.IPVersion, recs[i].Key.Proto = 4, flow.ProtoTCP
		recs[i].Bytes, recs[i].Packets = uint64(1000-i), 3
		recs[i].Iface = "lo"
	}
	_, ts := newTestServer(t, Config{Backend: &blockingBackend{live: recs}})
	code, h, body := get(t, ts, "/api/v1/live")
	if code != http.StatusOK || h.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("%d %v %s", code, h, body)
	}
	var want []byte
	for i := range recs {
		want = append(format.AppendJSON(want, &recs[i]), '\n')
	}
	if !bytes.Equal(body, want) {
		t.Errorf("live:\n%s\nwant\n%s", body, want)
	}
	if _, _, body := get(t, ts, "/api/v1/live?limit=2"); bytes.Count(body, []byte("\n")) != 2 || !bytes.HasPrefix(want, body) {
		t.Errorf("limit=2:\n%s", body)
	}
	if code, _, body := get(t, ts, "/api/v1/live?top=2"); code != http.StatusBadRequest || apiError(t, body).Param != "top" {
		t.Errorf("unknown parameter: %d %s", code, body)
	}
	_, ts2 := newTestServer(t, Config{})
	code, _, body = get(t, ts2, "/api/v1/live")
	if e := apiError(t, body); code != http.StatusNotFound || e.Code != CodeNoLive {
		t.Errorf("no live: %d %+v", code, e)
	}
}

// TestMeta: the attributes are the query language's, the interfaces and
// span those of the store.
func TestMeta(t *testing.T) {
	st := smallStore(t)
	_, ts := newTestServer(t, Config{Version: "v-test"})
	code, _, body := get(t, ts, "/api/v1/meta")
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	var m struct {
		Version    string
		Backend    string
		Attributes struct {
			Group, Condition []string
			Presets          map[string][]string
		}
		Interfaces []IfaceSpan
		Nodes      []string
		First      *time.Time
		Last       *time.Time
		Live       bool
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	first, last, err := st.Span()
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != "v-test" || m.Backend != "store" || m.Live || len(m.Nodes) != 0 || m.First == nil ||
		m.First.UnixNano() != first || m.Last.UnixNano() != last {
		t.Errorf("meta %+v, span %d..%d", m, first, last)
	}
	if len(m.Interfaces) != 2 || m.Interfaces[0].Iface != "eth0" || m.Interfaces[1].Iface != "eth1" ||
		m.Interfaces[0].Flows+m.Interfaces[1].Flows != int64(smallGen.Rows()) || m.Interfaces[0].Days != 2 {
		t.Errorf("interfaces %+v", m.Interfaces)
	}
	if strings.Join(m.Attributes.Group, ",") != strings.Join(query.GroupAttributes(), ",") ||
		strings.Join(m.Attributes.Presets["talk_conv"], ",") != "sip,dip" || len(m.Attributes.Condition) == 0 {
		t.Errorf("attributes %+v", m.Attributes)
	}
	_, ts2 := newTestServer(t, Config{Backend: &blockingBackend{}})
	if _, _, body := get(t, ts2, "/api/v1/meta"); !bytes.Contains(body, []byte(`"node-a"`)) {
		t.Errorf("nodes of the backend missing: %s", body)
	}
}

// TestHealth: /healthz answers while the process runs; /readyz follows
// the backend.
func TestHealth(t *testing.T) {
	b := &blockingBackend{}
	_, ts := newTestServer(t, Config{Backend: b})
	if code, _, body := get(t, ts, "/healthz"); code != http.StatusOK || !bytes.Contains(body, []byte(`"ok"`)) {
		t.Errorf("healthz: %d %s", code, body)
	}
	if code, _, body := get(t, ts, "/readyz"); code != http.StatusOK || !bytes.Contains(body, []byte(`"ready"`)) {
		t.Errorf("readyz: %d %s", code, body)
	}
	b.notReady = errors.New("store gone")
	if code, _, body := get(t, ts, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(apiError(t, body).Message, "store gone") {
		t.Errorf("readyz not ready: %d %s", code, body)
	}
}

// TestMethodsAndPaths: only GET and HEAD; unknown API paths are JSON 404s.
func TestMethodsAndPaths(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	for _, p := range []string{"/api/v1/query?group=sip", "/api/v1/meta", "/healthz", "/"} {
		code, h, body := do(t, ts, http.MethodPost, p)
		if e := apiError(t, body); code != http.StatusMethodNotAllowed || e.Code != CodeMethod || h.Get("Allow") != "GET, HEAD" {
			t.Errorf("POST %s: %d %+v", p, code, e)
		}
	}
	if code, _, body := do(t, ts, http.MethodHead, "/api/v1/meta"); code != http.StatusOK || len(body) != 0 {
		t.Errorf("HEAD: %d %q", code, body)
	}
	for _, p := range []string{"/api/v2/query", "/api/v1/nothing", "/nothing.js", "/manifest.json"} {
		code, _, body := get(t, ts, p)
		if e := apiError(t, body); code != http.StatusNotFound || e.Code != CodeNotFound {
			t.Errorf("%s: %d %+v", p, code, e)
		}
	}
}

// TestConsoleFiles: / is index.html, files are served with their type, a
// CSP that allows only the console's own files, gzip and ETags.
func TestConsoleFiles(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	code, h, body := get(t, ts, "/")
	if code != http.StatusOK || string(body) != string(testConsole["index.html"].Data) ||
		!strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("/: %d %v %s", code, h, body)
	}
	code, h, body = get(t, ts, "/app.js")
	if code != http.StatusOK || !strings.Contains(h.Get("Content-Type"), "javascript") || string(body) != "console.log('weir');\n" {
		t.Errorf("/app.js: %d %v %s", code, h, body)
	}
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/app.js", nil)
	req.Header.Set("If-None-Match", h.Get("ETag"))
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: %d", resp.StatusCode)
	}
	// The embedded build, when no console is given.
	s, err := New(Config{Backend: &blockingBackend{}})
	if err != nil || s.console.files["/index.html"] == nil {
		t.Fatalf("embedded console: %v", err)
	}
	if _, err := New(Config{Backend: &blockingBackend{}, Console: testConsoleNoIndex}); err == nil {
		t.Error("a console without index.html was accepted")
	}
	if s, _ := New(Config{Backend: &blockingBackend{}, NoConsole: true}); s.console != nil {
		t.Error("NoConsole served a console")
	}
}

// TestServerTiming: a query's answer says how long it waited for a slot,
// ran and was encoded (Server-Timing), so the console's waterfall splits
// server time from the rest; meta and live say theirs.
func TestServerTiming(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	re := regexp.MustCompile(`^queue;dur=\d+\.\d, query;dur=\d+\.\d, encode;dur=\d+\.\d$`)
	code, h, body := get(t, ts, "/api/v1/query?group=sip&limit=3")
	if code != http.StatusOK || !re.MatchString(h.Get("Server-Timing")) {
		t.Errorf("query: %d Server-Timing %q %s", code, h.Get("Server-Timing"), body)
	}
	code, h, body = get(t, ts, "/api/v1/meta")
	if code != http.StatusOK || !regexp.MustCompile(`^holdings;dur=\d+\.\d$`).MatchString(h.Get("Server-Timing")) {
		t.Errorf("meta: %d Server-Timing %q %s", code, h.Get("Server-Timing"), body)
	}
	code, h, _ = get(t, ts, "/api/v1/query?group=nosuch")
	if code != http.StatusBadRequest || h.Get("Server-Timing") != "" {
		t.Errorf("a refused query: %d Server-Timing %q", code, h.Get("Server-Timing"))
	}
}
