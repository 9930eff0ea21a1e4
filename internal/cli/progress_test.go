package cli

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Nothing is drawn where there is no terminal, and nothing before
// ProgressDelay; after it the bar shows the count, and Finish clears it.
func TestProgress(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if TerminalOrNil(f) != nil {
		t.Error("a regular file taken for a terminal")
	}
	nilBar := NewProgress(nil, 10, "x")
	nilBar.Add(1) // a nil bar is valid
	nilBar.Finish()

	var b bytes.Buffer
	p := NewProgress(&b, 1000, "rows")
	p.Add(1)
	if b.Len() != 0 {
		t.Fatalf("drawn before the delay: %q", b.String())
	}
	p.start = p.start.Add(-2 * ProgressDelay)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				p.Add(1)
			}
		}()
	}
	wg.Wait()
	if p.done != 401 {
		t.Errorf("done %d after 401 steps", p.done)
	}
	time.Sleep(150 * time.Millisecond) // past the throttle
	p.Add(1)
	if !strings.Contains(b.String(), "rows") || !strings.Contains(b.String(), "/1000") {
		t.Errorf("bar: %q", b.String())
	}
	p.Finish()
}
