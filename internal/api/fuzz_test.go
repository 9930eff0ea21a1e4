package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzQueryParams: whatever query string a client sends to
// /api/v1/query, the answer is 200 or a 4xx JSON error with a message,
// never a panic or a 5xx, and a syntax error's offsets lie within its
// input.
func FuzzQueryParams(f *testing.F) {
	for _, s := range []string{"group=sip", "group=sip&condition=dport%20%3D%20443", "group=talk_conv&resolution=5m&limit=0",
		"group=sip&condition=(port%2022", "group=sip,bogus", "group=sip&from=-24h&to=now&sort=packets:in&ascending",
		"group=sip&condition=%22unterminated", "group=%C3%A9&iface=a&iface=b", "limit=-1", "group=sip&live=maybe", "&&==%%"} {
		f.Add(s)
	}
	release := make(chan struct{})
	close(release) // answers at once
	s, err := New(Config{Backend: &blockingBackend{started: make(chan struct{}, 1<<20), release: release}, NoConsole: true,
		Now: func() time.Time { return time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		f.Fatal(err)
	}
	backend := s.cfg.Backend.(*blockingBackend)
	f.Fuzz(func(t *testing.T, raw string) {
		for len(backend.started) > 0 {
			<-backend.started
		}
		req := httptest.NewRequest(http.MethodGet, "/api/v1/query", nil)
		req.URL.RawQuery = raw
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code == http.StatusOK {
			return
		}
		if rec.Code < 400 || rec.Code >= 500 {
			t.Fatalf("%q: status %d: %s", raw, rec.Code, rec.Body.String())
		}
		var body struct{ Error *Error }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error == nil || body.Error.Message == "" || body.Error.Status != rec.Code {
			t.Fatalf("%q: not a JSON error: %s", raw, rec.Body.String())
		}
		if e := body.Error; e.Pos != nil && (*e.Pos < 0 || *e.Pos > len(*e.Input) || *e.End < *e.Pos || *e.End > len(*e.Input) || !strings.Contains(e.Caret, "^")) {
			t.Fatalf("%q: offsets %d..%d outside %q", raw, *e.Pos, *e.End, *e.Input)
		}
	})
}
