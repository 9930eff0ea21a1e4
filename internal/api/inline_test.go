package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/weir-dev/weir/internal/httpauth"
)

// headConsole is a console whose index.html has a head to put meta into.
var headConsole = fstest.MapFS{
	"index.html": {Data: []byte("<!doctype html><html><head><title>weir</title><script type=module src=app.js></script></head><body></body></html>")},
	"app.js":     {Data: []byte("console.log('weir');\n")},
}

// metaBlock finds the data block inlineMeta writes.
var metaBlock = regexp.MustCompile(`<script id="weir-meta" type="application/json">([^<]*)</script>\n</head>`)

// hostileHoldings answers Holdings with a node name that tries to end the
// page's data block and run a script, or with err.
type hostileHoldings struct {
	blockingBackend
	err error
}

const hostileNode = "</script><script>alert(1)</script><!--"

func (b *hostileHoldings) Holdings(context.Context) (*Holdings, error) {
	if b.err != nil {
		return nil, b.err
	}
	return &Holdings{Interfaces: []IfaceSpan{}, Nodes: []string{hostileNode}}, nil
}

// TestConsoleInlineMeta: with InlineMeta, index.html carries
// /api/v1/meta's answer (the same JSON value) in a data block just before
// </head>, under the console's CSP and not cached (it is this moment's);
// a name from the store cannot end the block (no '<' in it, and it reads
// back the same); a backend that cannot say serves the page as built;
// without InlineMeta the page is the build, with its ETag.
func TestConsoleInlineMeta(t *testing.T) {
	_, ts := newTestServer(t, Config{Console: headConsole, InlineMeta: true})
	code, h, page := get(t, ts, "/")
	m := metaBlock.FindSubmatch(page)
	if code != http.StatusOK || m == nil || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("/: %d %v %s", code, h, page)
	}
	if h.Get("Content-Security-Policy") != consoleCSP || h.Get("Cache-Control") != "no-store" || h.Get("ETag") != "" {
		t.Errorf("/ with meta: CSP %q, Cache-Control %q, ETag %q", h.Get("Content-Security-Policy"), h.Get("Cache-Control"), h.Get("ETag"))
	}
	if !bytes.Equal(bytes.Replace(page, m[0][:len(m[0])-len("</head>")], nil, 1), headConsole["index.html"].Data) {
		t.Errorf("the page is not the build plus the block:\n%s", page)
	}
	_, _, api := get(t, ts, "/api/v1/meta")
	var inlined, asked any
	if err := json.Unmarshal(m[1], &inlined); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(api, &asked); err != nil {
		t.Fatal(err)
	}
	if a, b := mustJSON(t, inlined), mustJSON(t, asked); a != b {
		t.Errorf("inlined meta\n%s\n/api/v1/meta\n%s", a, b)
	}

	_, hostile := newTestServer(t, Config{Backend: &hostileHoldings{}, Console: headConsole, InlineMeta: true})
	_, _, page = get(t, hostile, "/")
	m = metaBlock.FindSubmatch(page)
	if m == nil || bytes.Count(page, []byte("<script")) != 2 {
		t.Fatalf("a hostile node name broke the page:\n%s", page)
	}
	var doc struct{ Nodes []string }
	if err := json.Unmarshal(m[1], &doc); err != nil || len(doc.Nodes) != 1 || doc.Nodes[0] != hostileNode {
		t.Errorf("the hostile name does not read back: %v %q", err, doc.Nodes)
	}

	_, failing := newTestServer(t, Config{Backend: &hostileHoldings{err: errors.New("disk gone")}, Console: headConsole, InlineMeta: true})
	code, _, page = get(t, failing, "/")
	if code != http.StatusOK || !bytes.Equal(page, headConsole["index.html"].Data) {
		t.Errorf("holdings failing: %d %s", code, page)
	}

	_, plain := newTestServer(t, Config{Console: headConsole})
	_, h, page = get(t, plain, "/")
	if !bytes.Equal(page, headConsole["index.html"].Data) || h.Get("ETag") == "" {
		t.Errorf("without InlineMeta: ETag %q, %s", h.Get("ETag"), page)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStandaloneInlineMeta: 'weir serve' without a token puts meta into
// the console's page; with a token it does not (the page is open to all,
// meta only to the token's holders).
func TestStandaloneInlineMeta(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tokenFile string
		inline    bool
	}{{"", true}, {tokenFile, false}} {
		srv, err := NewStandalone(Config{Backend: &blockingBackend{}, Console: headConsole}, httpauth.Config{Addr: "127.0.0.1:0", TokenFile: c.tokenFile})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Run(ctx) }()
		client := &http.Client{Timeout: 30 * time.Second}
		resp, err := client.Get("http://" + srv.Listener.Addr().String() + "/")
		var page []byte
		if err == nil {
			page, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		cancel()
		if rerr := <-done; rerr != nil {
			t.Error(rerr)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := metaBlock.Match(page); got != c.inline {
			t.Errorf("token file %q: meta in the page %v, want %v:\n%s", c.tokenFile, got, c.inline, page)
		}
	}
}
