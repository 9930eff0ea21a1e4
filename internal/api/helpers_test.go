package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/gendb"
	"github.com/weir-dev/weir/internal/query"
	"github.com/weir-dev/weir/internal/store"
)

// smallGen is a small gendb store: 2 interfaces, 2 days × 24 blocks × 200 flows.
var smallGen = gendb.Config{Days: 2, BlocksPerDay: 24, FlowsPerBlock: 200, Clients: 300, Servers: 40, Seed: 7, Ifaces: []string{"eth0", "eth1"}}

var (
	smallOnce sync.Once
	smallDir  string
	smallErr  error
)

// smallStore returns the small store, written once per test binary and
// opened read-only for each caller.
func smallStore(t testing.TB) *store.Store {
	t.Helper()
	smallOnce.Do(func() {
		if smallDir, smallErr = os.MkdirTemp("", "weir-api-test-"); smallErr != nil {
			return
		}
		var s *store.Store
		if s, smallErr = store.Open(store.Config{Dir: smallDir, NoSync: true, Writeout: 24 * time.Hour}); smallErr != nil {
			return
		}
		smallErr = gendb.Generate(smallGen, func(_ int64, recs []flow.Record) error {
			if err := s.Write(recs); err != nil {
				return err
			}
			return s.Flush()
		})
		if err := s.Close(); smallErr == nil {
			smallErr = err
		}
	})
	if smallErr != nil {
		t.Fatal(smallErr)
	}
	st, err := store.OpenReadOnly(smallDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestMain(m *testing.M) {
	code := m.Run()
	if smallDir != "" {
		os.RemoveAll(smallDir)
	}
	os.Exit(code)
}

// testConsole stands in for the built console in most tests.
var testConsole = fstest.MapFS{
	"index.html": {Data: []byte("<!doctype html><title>weir</title><script src=app.js></script>")},
	"app.js":     {Data: []byte("console.log('weir');\n")},
}

// newTestServer serves cfg (the small store's backend when none) on a
// loopback httptest server.
func newTestServer(t testing.TB, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.Backend == nil {
		cfg.Backend = NewStoreBackend(smallStore(t), nil)
	}
	if cfg.Console == nil {
		cfg.Console = testConsole
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

// get fetches ts's path and returns the status, headers and body.
func get(t testing.TB, ts *httptest.Server, path string) (int, http.Header, []byte) {
	t.Helper()
	return do(t, ts, http.MethodGet, path)
}

func do(t testing.TB, ts *httptest.Server, method, path string) (int, http.Header, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// apiError decodes an error body.
func apiError(t testing.TB, b []byte) *Error {
	t.Helper()
	var body struct{ Error *Error }
	if err := json.Unmarshal(b, &body); err != nil || body.Error == nil {
		t.Fatalf("not an error body (%v): %s", err, b)
	}
	return body.Error
}

// elapsedRE matches the one field of a query answer that differs run to
// run: the time it took.
var elapsedRE = regexp.MustCompile(`"elapsed_ms": [0-9.e+-]+`)

// MaskElapsed replaces the elapsed time of a query answer by 0.
func maskElapsed(b []byte) []byte { return elapsedRE.ReplaceAll(b, []byte(`"elapsed_ms": 0`)) }

// blockingBackend answers after release is closed, or when ctx ends.
type blockingBackend struct {
	StoreBackend
	started  chan struct{}
	release  chan struct{}
	live     []flow.Record
	notReady error
}

func (b *blockingBackend) Name() string { return "blocking" }

func (b *blockingBackend) Query(ctx context.Context, q *query.Query, live bool) (*query.Result, error) {
	b.started <- struct{}{}
	select {
	case <-b.release:
		return &query.Result{Query: q}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *blockingBackend) Live(context.Context) ([]flow.Record, error) {
	if b.live == nil {
		return nil, ErrNoLive
	}
	return b.live, nil
}

func (b *blockingBackend) Holdings(context.Context) (*Holdings, error) {
	return &Holdings{Interfaces: []IfaceSpan{}, Nodes: []string{"node-a", "node-b"}, Live: b.live != nil}, nil
}

func (b *blockingBackend) Ready(context.Context) error { return b.notReady }

var testConsoleNoIndex = fstest.MapFS{"app.js": {Data: []byte("x")}}

// recorder is a minimal http.ResponseWriter.
type recorder struct {
	h    http.Header
	body bytes.Buffer
}

func newRecorder() *recorder                    { return &recorder{h: http.Header{}} }
func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(int)             {}
