//go:build unix

package pcap

import (
	"bytes"
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/source"
)

// nonblocking reports whether f's open file description has O_NONBLOCK.
func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	var ferr error
	rc.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) })
	if ferr != nil {
		t.Fatal(ferr)
	}
	return flags&unix.O_NONBLOCK != 0
}

// pipe returns a pipe: blocking as a shell makes one, or Go's own.
func pipe(t *testing.T, blocking bool) (r, w *os.File) {
	t.Helper()
	if !blocking {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		return r, w
	}
	var fds [2]int
	syscall.ForkLock.RLock() // pipe then close-on-exec: no Pipe2 on darwin; no exec in between
	err := unix.Pipe(fds[:])
	if err == nil {
		unix.CloseOnExec(fds[0])
		unix.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fds[0]), "pipe-r"), os.NewFile(uintptr(fds[1]), "pipe-w")
}

// TestFilesStop: a read blocked on a pipe that stays open (a live
// capture piped in) returns source.ErrStopped after Stop, and the pipe's
// blocking mode is as it was: a shell's pipe is blocking, Go's os.Pipe not.
func TestFilesStop(t *testing.T) {
	for _, blocking := range []bool{true, false} {
		a, _ := pcapAt(10, 1, 0)
		pr, pw := pipe(t, blocking)
		if _, err := pw.Write(a); err != nil {
			t.Fatal(err)
		}
		before := nonblocking(t, pr)
		if before == blocking {
			t.Fatalf("pipe blocking=%v has O_NONBLOCK %v", blocking, before)
		}
		m, err := OpenFiles([]string{"-"}, pr)
		if err != nil {
			t.Fatal(err)
		}
		var f source.Frame
		if err := m.Next(&f); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- m.Next(&f) }() // blocks: the writer is still open
		select {
		case err := <-done:
			t.Fatalf("Next returned %v with the pipe open", err)
		case <-time.After(200 * time.Millisecond):
		}
		m.Stop()
		select {
		case err := <-done:
			if !errors.Is(err, source.ErrStopped) {
				t.Fatalf("after Stop: %v, want source.ErrStopped", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Next still blocked 20s after Stop")
		}
		m.Close()
		if after := nonblocking(t, pr); after != before {
			t.Fatalf("O_NONBLOCK was %v, is %v after Close", before, after)
		}
		// The pipe still works for its owner.
		go pw.Write([]byte{1, 2, 3})
		buf := make([]byte, 3)
		if _, err := io.ReadFull(pr, buf); err != nil || !bytes.Equal(buf, []byte{1, 2, 3}) {
			t.Fatalf("pipe after Close: %v %v", buf, err)
		}
		pr.Close()
		pw.Close()
	}
}
