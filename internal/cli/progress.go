package cli

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// TerminalOrNil returns f when it is a terminal, else nil: the writer
// progress goes to (NewProgress draws nothing on nil).
func TerminalOrNil(f *os.File) io.Writer {
	if f == nil || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return f
}

// IsTerminal reports whether w is a terminal: an *os.File open on one.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && f != nil && term.IsTerminal(int(f.Fd()))
}

// ProgressDelay is how long an operation runs before its bar is drawn:
// quick ones show nothing. WEIR_PROGRESS_DELAY (a Go duration, e.g. 0s)
// overrides it: for tests, which cannot rely on an operation being slow.
var ProgressDelay = progressDelay(os.Getenv("WEIR_PROGRESS_DELAY"))

func progressDelay(env string) time.Duration {
	if d, err := time.ParseDuration(env); err == nil && d >= 0 {
		return d
	}
	return 500 * time.Millisecond
}

// Progress is a progress bar on a terminal, or nothing. A nil *Progress is
// valid and draws nothing; its methods are safe for concurrent use.
type Progress struct {
	mu    sync.Mutex
	w     io.Writer
	desc  string
	total int64
	done  int64
	start time.Time
	bar   *progressbar.ProgressBar // drawn once ProgressDelay has passed
}

// NewProgress returns a bar of total steps described by desc, drawn on w;
// nil (nothing drawn) when w is nil (TerminalOrNil: not a terminal) or
// total is not positive.
func NewProgress(w io.Writer, total int64, desc string) *Progress {
	if w == nil || total <= 0 {
		return nil
	}
	return &Progress{w: w, desc: desc, total: total, start: time.Now()}
}

// Set says that done of the total steps are done.
func (p *Progress) Set(done int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.set(done)
}

// set draws done; p.mu is held.
func (p *Progress) set(done int64) {
	p.done = done
	if p.bar == nil {
		if time.Since(p.start) < ProgressDelay {
			return
		}
		p.bar = progressbar.NewOptions64(p.total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(p.desc),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionSetWidth(30))
	}
	_ = p.bar.Set64(done) // a progress bar on stderr: a failed redraw is cosmetic
}

// Add says that n more steps are done.
func (p *Progress) Add(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.set(p.done + n)
}

// Finish clears the bar (the command's own output follows).
func (p *Progress) Finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Finish() // a progress bar on stderr: a failed redraw is cosmetic
		p.bar = nil
	}
}

// LazyProgress returns a progress callback (done of total units) that
// draws its bar on out from its first call, when the total is known,
// and the bar's Finish. With out nil, set is nil: nothing is drawn.
func LazyProgress(out io.Writer, unit string) (set func(done, total int), finish func()) {
	var bar *Progress
	var once sync.Once
	finish = func() { bar.Finish() }
	if out == nil {
		return nil, finish
	}
	return func(done, total int) {
		once.Do(func() { bar = NewProgress(out, int64(total), unit) })
		bar.Set(int64(done))
	}, finish
}
