package enrich

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"time"
)

// Watcher keeps an Enricher's inventory in step with a file: it polls the
// file's identity, size and modification time, and when one changed and
// the content's hash too, decodes it and loads it. A file that cannot be
// read, decoded or validated is logged and counted (reload errors) and
// the previous inventory stays in use. Polling works on every platform
// and file system, and sees a file replaced by rename (editors, Kubernetes
// ConfigMap volumes) as well as one rewritten in place.
type Watcher struct {
	e    *Enricher
	path string
	logf func(format string, a ...any)

	// What was last looked at: the file, and the hash of what was last
	// read (loaded or refused).
	info    os.FileInfo
	sum     [sha256.Size]byte
	summed  bool
	lastErr string // the last stat error logged, to log (and count) it once
}

// NewWatcher returns a Watcher loading path into e; logf (nil: discard)
// receives one line per reload and per refused file.
func NewWatcher(e *Enricher, path string, logf func(format string, a ...any)) *Watcher {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Watcher{e: e, path: path, logf: logf}
}

// Load reads, decodes and loads the file now, whether or not it changed:
// the first load, whose error the caller usually treats as fatal. It
// returns the error Check would log.
func (w *Watcher) Load() error {
	info, err := os.Stat(w.path)
	if err != nil {
		w.e.CountError()
		return err
	}
	w.info = info
	return w.read()
}

// Check reloads the file if it changed since the last Load or Check,
// and returns whether an inventory was loaded. Errors are logged and
// counted, not returned.
func (w *Watcher) Check() bool {
	info, err := os.Stat(w.path)
	if err != nil {
		if msg := err.Error(); msg != w.lastErr {
			w.lastErr = msg
			w.e.CountError()
			w.logf("enrich: %v; keeping the previous inventory", err)
		}
		return false
	}
	w.lastErr = ""
	if w.info != nil && os.SameFile(w.info, info) && info.Size() == w.info.Size() && info.ModTime().Equal(w.info.ModTime()) {
		return false
	}
	w.info = info
	if err := w.read(); err != nil {
		if err != errUnchanged {
			w.logf("enrich: %v; keeping the previous inventory", err)
		}
		return false
	}
	st := w.e.Index()
	w.logf("enrich: loaded %s: %d workloads, %d services, %d VIPs", w.path, st.Workloads(), st.Services(), st.VIPs())
	return true
}

// errUnchanged: the file was touched but its content is what was last read.
var errUnchanged = fmt.Errorf("enrich: unchanged")

// read reads the file, skips it if its content is unchanged, and loads it.
func (w *Watcher) read() error {
	data, err := readBounded(w.path)
	if err != nil {
		w.e.CountError()
		return err
	}
	sum := sha256.Sum256(data)
	if w.summed && sum == w.sum {
		return errUnchanged
	}
	w.sum, w.summed = sum, true
	inv, err := DecodeInventory(w.path, data)
	if err != nil {
		w.e.CountError()
		return err
	}
	return w.e.Load(inv)
}

// Run checks the file every interval until ctx is done.
func (w *Watcher) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.Check()
		}
	}
}

// Watch loads path into e now, then checks it every interval (0: never)
// until ctx is done, in a goroutine of its own. A first load that fails
// returns its error and starts nothing.
func Watch(ctx context.Context, e *Enricher, path string, interval time.Duration, logf func(format string, a ...any)) error {
	w := NewWatcher(e, path, logf)
	if err := w.Load(); err != nil {
		return err
	}
	if interval > 0 {
		go w.Run(ctx, interval)
	}
	return nil
}
