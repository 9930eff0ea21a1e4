package agent

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/weir-dev/weir/internal/httpauth"
)

// TestOpenOnLoopback: with a token, a loopback listener serves /metrics
// and the index page without it (local scrapers) and nothing else; off
// loopback every path needs it.
func TestOpenOnLoopback(t *testing.T) {
	ok := http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { rw.WriteHeader(http.StatusOK) })
	for _, loopback := range []bool{true, false} {
		g := httpauth.Middleware([]byte("0123456789abcdef-token"), ok, OpenOnLoopback(loopback))
		for path, open := range map[string]bool{"/metrics": loopback, "/": loopback, "/flows/live": false, "/metrics/": false, "/api/v1/live": false} {
			rec := httptest.NewRecorder()
			g.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil))
			if want := map[bool]int{true: 200, false: 401}[open]; rec.Code != want {
				t.Errorf("loopback %v, GET %s without the token: %d, want %d", loopback, path, rec.Code, want)
			}
			rec = httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil)
			req.Header.Set("Authorization", "Bearer 0123456789abcdef-token")
			if g.ServeHTTP(rec, req); rec.Code != 200 {
				t.Errorf("loopback %v, GET %s with the token: %d", loopback, path, rec.Code)
			}
		}
	}
}
