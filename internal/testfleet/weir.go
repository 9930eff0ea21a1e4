package testfleet

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

var (
	weirOnce sync.Once
	weirBin  string
	weirErr  error
)

// Weir is a weir binary for a test to run as a process of its own (weir
// ingest beside a benchmark, so that each process's CPU is its own):
// WEIR_BIN when set, else one built from this tree once per test process
// (into a directory removed at exit by the OS's temp cleaning; the build
// is bounded to 10 minutes).
func Weir(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("WEIR_BIN"); b != "" {
		return b
	}
	weirOnce.Do(func() {
		root, err := repoRoot()
		if err != nil {
			weirErr = err
			return
		}
		dir, err := os.MkdirTemp("", "weir-testfleet-")
		if err != nil {
			weirErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		weirBin = filepath.Join(dir, "weir")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", weirBin, "./cmd/weir")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			weirErr = &buildError{err, string(out)}
		}
	})
	if weirErr != nil {
		t.Fatalf("building weir: %v", weirErr)
	}
	return weirBin
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }
