//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReadStdin runs the binary on standard input (one build for both).
func TestReadStdin(t *testing.T) {
	bin := buildWeir(t)
	t.Run("pipe", func(t *testing.T) { readStdinPipe(t, bin) })
	t.Run("sigterm", func(t *testing.T) { readStdinSIGTERM(t, bin) })
}

// readStdinPipe: `zcat trace.pcapng.gz | weir capture --read -` and a
// gzip stream piped in as it is give the records of reading the file.
func readStdinPipe(t *testing.T, bin string) {
	whole, _ := writeScenario(t, 1, false)
	want := sortedJSON(t, "--read", whole)
	raw, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	gz := compress(t, "gzip", raw)
	zcat, err := exec.LookPath("zcat")
	if err != nil {
		t.Skip("zcat not installed")
	}
	for _, viaZcat := range []bool{true, false} {
		weir := exec.Command(bin, "capture", "--read", "-", "-o", "json", "--data-dir", "off")
		var out, errb bytes.Buffer
		weir.Stdout, weir.Stderr = &out, &errb
		var z *exec.Cmd
		if viaZcat {
			z = exec.Command(zcat)
			z.Stdin = bytes.NewReader(gz)
			pipe, err := z.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			weir.Stdin = pipe
			if err := z.Start(); err != nil {
				t.Fatal(err)
			}
		} else {
			weir.Stdin = bytes.NewReader(gz)
		}
		if err := weir.Run(); err != nil {
			t.Fatalf("zcat %v: weir: %v\n%s", viaZcat, err, errb.String())
		}
		if z != nil {
			if err := z.Wait(); err != nil {
				t.Fatal(err)
			}
		}
		got := strings.Split(strings.TrimSpace(out.String()), "\n")
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("zcat %v: %d records from stdin, %d from the file", viaZcat, len(got), len(want))
		}
	}
}

// readStdinSIGTERM: weir reading a pipe whose writer stays open (a live
// tcpdump -w -) flushes every flow with reason shutdown on SIGTERM and
// exits 0, instead of waiting for more input.
func readStdinSIGTERM(t *testing.T, bin string) {
	whole, _ := writeScenario(t, 1, true) // classic pcap of eth0
	raw, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil { // blocking, as a shell makes it
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	defer w.Close()
	weir := exec.Command(bin, "capture", "--read", "-", "-o", "json", "--data-dir", "off")
	var out, errb bytes.Buffer
	weir.Stdin, weir.Stdout, weir.Stderr = r, &out, &errb
	if err := weir.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer weir.Process.Kill()
	// The first half, then the rest once weir has read the first: reading
	// the second proves weir is past its start (its signal handler set).
	half := len(raw) / 2
	for _, chunk := range [][]byte{raw[:half], raw[half:]} {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			n, err := unix.IoctlGetInt(int(w.Fd()), unix.TIOCINQ) // FIONREAD: bytes in the pipe
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("weir left %d bytes unread for 30s\n%s", n, errb.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := weir.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- weir.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if err != nil {
			t.Fatalf("weir exited with %v after SIGTERM\n%s", err, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("weir still running 30s after SIGTERM, blocked on its input\n%s", errb.String())
	}
	n, shutdown := 0, 0
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var rec jsonRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		n++
		if rec.EndReason == "shutdown" {
			shutdown++
		}
	}
	if n < 50 || shutdown == 0 {
		t.Fatalf("%d records, %d ended by shutdown\n%s", n, shutdown, errb.String())
	}
}
