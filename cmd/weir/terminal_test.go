package main

import (
	"strings"
	"sync"
	"testing"
)

// fakeTerm stands a buffer in for a terminal.
type fakeTerm struct {
	mu sync.Mutex
	b  strings.Builder
}

func (f *fakeTerm) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.b.Write(p)
}

func (f *fakeTerm) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.b.String()
}

// TestCollectStatusLine: weir collect keeps a one-line summary on standard
// error when it is a terminal (progressOut), redrawn in place and erased
// before the counters; when it is not, standard error carries no control
// sequence and no summary.
func TestCollectStatusLine(t *testing.T) {
	args := []string{"collect", "--listen", "udp://127.0.0.1:0", "--duration", "2500ms", "-o", "none", "--data-dir", "off", "--stats"}
	code, _, plain := runCLI(args...)
	if code != exitOK || strings.ContainsAny(plain, "\r\x1b") || strings.Contains(plain, "records/s") {
		t.Fatalf("not a terminal: exit %d, stderr %q", code, plain)
	}
	term := &fakeTerm{}
	progressOut = term
	defer func() { progressOut = nil }()
	code, _, errs := runCLI(args...)
	out := term.String()
	if code != exitOK || !strings.HasPrefix(out, "\rweir collect: 0 records/s, 0 records; 0 exporter sessions, 0 templates; ") ||
		!strings.HasSuffix(out, "\r\x1b[K") || strings.Contains(out, "\n") {
		t.Fatalf("terminal: exit %d, status %q, stderr %q", code, out, errs)
	}
	if strings.ContainsAny(errs, "\r\x1b") {
		t.Errorf("the summary went to the escaped stderr too: %q", errs)
	}
}
