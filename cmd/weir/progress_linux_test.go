package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns a pseudo-terminal's master and its terminal end.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// bench gendb draws a progress bar on stderr when it is a terminal, and
// writes nothing there but errors when it is not; stdout is the same.
func TestProgressOnlyOnTerminal(t *testing.T) {
	bin := buildWeir(t)
	gendb := func(stderr *os.File) string {
		var out bytes.Buffer
		cmd := exec.Command(bin, "bench", "gendb", "--data-dir", filepath.Join(t.TempDir(), "db"), "--no-sync",
			"--days", "1", "--blocks-per-day", "40", "--flows-per-block", "5000")
		cmd.Stdout, cmd.Stderr = &out, stderr
		// Draw at once: on a quiet machine 200,000 rows take less than the
		// half second a bar waits for.
		cmd.Env = append(os.Environ(), "WEIR_PROGRESS_DELAY=0s")
		if err := cmd.Run(); err != nil {
			t.Fatalf("gendb: %v", err)
		}
		return out.String()
	}
	master, tty := openPTY(t)
	defer master.Close()
	drawn := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(master) // until the terminal end is closed (EIO)
		drawn <- string(b)
	}()
	out := gendb(tty)
	tty.Close()
	var bar string
	select {
	case bar = <-drawn:
	case <-time.After(30 * time.Second):
		t.Fatal("the pseudo-terminal's output did not end")
	}
	if !strings.Contains(bar, "rows") || !strings.Contains(bar, "/200000") || !strings.Contains(out, "200,000 rows in 40 blocks") {
		t.Errorf("on a terminal: stderr %q, stdout %q", bar, out)
	}

	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out = gendb(f)
	if b, _ := os.ReadFile(f.Name()); len(b) != 0 || !strings.Contains(out, "200,000 rows") {
		t.Errorf("not a terminal: stderr %q, stdout %q", b, out)
	}
}
