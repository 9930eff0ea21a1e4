package metrics

import (
	"bytes"
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// serveTest serves the exact test registry on a loopback port.
func serveTest(t *testing.T) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, newTestRegistry(t))
	t.Cleanup(func() { s.Close() })
	return s, "http://" + s.Addr().String()
}

// client does not decompress by itself, so the tests see the raw encoding.
var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}

func do(t *testing.T, method, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestServeMetrics(t *testing.T) {
	_, base := serveTest(t)

	resp, body := do(t, "GET", base+"/metrics")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ContentType || resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("GET /metrics: %s, Content-Type %q, Content-Encoding %q", resp.Status, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Encoding"))
	}
	if string(body) != wantTestText {
		t.Errorf("GET /metrics body:\n%s\nwant:\n%s", body, wantTestText)
	}
	if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(wantTestText)) {
		t.Errorf("Content-Length %q, want %d", cl, len(wantTestText))
	}

	for _, ae := range []string{"gzip", "deflate, gzip;q=0.5", "br, *", "GZIP ; q=1.0"} {
		resp, body = do(t, "GET", base+"/metrics", "Accept-Encoding", ae)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" {
			t.Errorf("Accept-Encoding %q: %s, Content-Encoding %q", ae, resp.Status, resp.Header.Get("Content-Encoding"))
			continue
		}
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil || string(plain) != wantTestText {
			t.Errorf("Accept-Encoding %q: gunzipped body (err %v):\n%s", ae, err, plain)
		}
	}
	for _, ae := range []string{"gzip;q=0", "deflate", "br, gzip; q=0.000", "identity"} {
		resp, body = do(t, "GET", base+"/metrics", "Accept-Encoding", ae)
		if resp.Header.Get("Content-Encoding") != "" || string(body) != wantTestText {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, body %q...", ae, resp.Header.Get("Content-Encoding"), trim(body))
		}
	}

	resp, body = do(t, "HEAD", base+"/metrics")
	if resp.StatusCode != 200 || len(body) != 0 || resp.Header.Get("Content-Type") != ContentType {
		t.Errorf("HEAD /metrics: %s, %d body bytes, Content-Type %q", resp.Status, len(body), resp.Header.Get("Content-Type"))
	}

	for _, m := range []string{"POST", "PUT", "DELETE"} {
		resp, _ = do(t, m, base+"/metrics")
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /metrics: %s, Allow %q; want 405 with Allow: GET, HEAD", m, resp.Status, resp.Header.Get("Allow"))
		}
	}
	resp, _ = do(t, "POST", base+"/")
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %s, want 405", resp.Status)
	}

	resp, body = do(t, "GET", base+"/")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `href="/metrics"`) {
		t.Errorf("GET /: %s\n%s", resp.Status, body)
	}
	for _, p := range []string{"/metrics/", "/foo", "/metricsx", "/index.html"} {
		resp, _ = do(t, "GET", base+p)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", p, resp.Status)
		}
	}
}

func TestServerClose(t *testing.T) {
	s, base := serveTest(t)
	if resp, _ := do(t, "GET", base+"/metrics"); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if c, err := net.DialTimeout("tcp", s.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Error("still accepting connections after Close")
	}
}

func TestAcceptsGzip(t *testing.T) {
	for _, tc := range []struct {
		h    []string
		want bool
	}{
		{nil, false},
		{[]string{""}, false},
		{[]string{"gzip"}, true},
		{[]string{"deflate", "gzip"}, true},
		{[]string{"x-gzip"}, false},
		{[]string{"gzip;q=0"}, false},
		{[]string{"gzip;q=0.001"}, true},
		{[]string{"*;q=0"}, false},
		{[]string{"gzip;q=bogus"}, true}, // an unreadable quality counts as the default 1
	} {
		if got := acceptsGzip(tc.h); got != tc.want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", tc.h, got, tc.want)
		}
	}
}

// BenchmarkServeHTTP: a scrape through the handler (no network), gzip or not.
func BenchmarkServeHTTP(b *testing.B) {
	for _, gz := range []bool{false, true} {
		b.Run("gzip="+strconv.FormatBool(gz), func(b *testing.B) {
			r := newBenchRegistry(b)
			req, _ := http.NewRequest("GET", "/metrics", nil)
			if gz {
				req.Header.Set("Accept-Encoding", "gzip")
			}
			rw := &discardResponse{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(rw.h)
				r.ServeHTTP(rw, req)
			}
		})
	}
}

type discardResponse struct{ h http.Header }

func (d *discardResponse) Header() http.Header         { return d.h }
func (d *discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardResponse) WriteHeader(int)             {}
