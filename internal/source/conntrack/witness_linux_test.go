//go:build linux

package conntrack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/testhost"
)

// This file holds the independent witness of the lifecycle tests: the
// conntrack tool's own event listener (conntrack -E) reports each entry's
// final counters when the kernel destroys it, and the test's own TCP and
// UDP peers.

// ctKey identifies a connection of a test: protocol and the original
// tuple's ports (the client's ephemeral port makes it unique).
type ctKey struct {
	proto        uint8
	sport, dport uint16
}

func recKey(r *flow.Record) ctKey { return ctKey{r.Key.Proto, r.Key.SrcPort, r.Key.DstPort} }

// ctFinal is what the conntrack tool printed for a destroyed entry.
type ctFinal struct {
	orig, reply Counters
	id          uint64
}

// witness collects conntrack -E events of one namespace.
type witness struct {
	mu        sync.Mutex
	destroyed map[ctKey]ctFinal
	seen      map[ctKey]bool // any event
	dups      []string       // DESTROY lines for a key already destroyed (a tuple reused: the test avoids it)
}

// startWitness runs conntrack -E in h until the test ends and returns
// once the listener reported an event of a marker datagram sent from
// from to h, so no later event is missed.
func startWitness(t *testing.T, h, from *testhost.Host) *witness {
	t.Helper()
	bin := testhost.Need(t, "conntrack", "conntrack")
	w := &witness{destroyed: map[ctKey]ctFinal{}, seen: map[ctKey]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	// The child inherits the namespace of the thread that starts it.
	cmd := exec.CommandContext(ctx, bin, "-E", "-o", "extended,id", "--buffer-size", "8388608")
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := h.Do(cmd.Start); err != nil {
		cancel()
		t.Fatalf("conntrack -E: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.read(out)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(15 * time.Second); ; {
		port := testhost.SendDatagrams(t, from, netip.AddrPortFrom(h.Addr4, 9), 1, 8)
		if w.wait(func() bool { return w.seen[ctKey{17, port, 9}] }, 500*time.Millisecond) {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatal("conntrack -E reported no event within 15 s")
		}
	}
}

// read parses the listener's lines until it exits.
func (w *witness) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		k, f, ok := parseEvent(line)
		if !ok {
			continue
		}
		w.mu.Lock()
		w.seen[k] = true
		if strings.Contains(line, "[DESTROY]") {
			if _, dup := w.destroyed[k]; dup {
				w.dups = append(w.dups, line)
			}
			w.destroyed[k] = f
		}
		w.mu.Unlock()
	}
}

// wait polls cond (called with w locked) until it holds or d passes.
func (w *witness) wait(cond func() bool, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		w.mu.Lock()
		ok := cond()
		w.mu.Unlock()
		if ok {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// final returns the destroyed entries' counters (a copy).
func (w *witness) final() map[ctKey]ctFinal {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := make(map[ctKey]ctFinal, len(w.destroyed))
	for k, v := range w.destroyed {
		m[k] = v
	}
	return m
}

// parseEvent reads a conntrack -E -o extended,id line: the first
// sport/dport/packets/bytes are the original direction, the second the
// reply.
func parseEvent(line string) (ctKey, ctFinal, bool) {
	var k ctKey
	var f ctFinal
	var ports, pk, by int
	for _, fld := range strings.Fields(line) {
		name, val, ok := strings.Cut(fld, "=")
		if !ok {
			switch fld {
			case "tcp":
				k.proto = 6
			case "udp":
				k.proto = 17
			}
			continue
		}
		v, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "sport":
			if ports == 0 {
				k.sport = uint16(v)
			}
		case "dport":
			if ports == 0 {
				k.dport = uint16(v)
			}
			ports++
		case "packets":
			if pk++; pk == 1 {
				f.orig.Packets = v
			} else {
				f.reply.Packets = v
			}
		case "bytes":
			if by++; by == 1 {
				f.orig.Bytes = v
			} else {
				f.reply.Bytes = v
			}
		case "id":
			f.id = v
		}
	}
	return k, f, k.proto != 0 && k.sport != 0
}

// setTimeouts sets conntrack timeouts (seconds) in h's namespace, where
// they are per namespace, for entries created from now on.
func setTimeouts(t *testing.T, h *testhost.Host, kv map[string]int) {
	t.Helper()
	err := h.Do(func() error {
		for k, v := range kv {
			if err := os.WriteFile("/proc/sys/net/netfilter/"+k, []byte(strconv.Itoa(v)), 0); err != nil {
				return fmt.Errorf("setting %s in the test namespace: %w", k, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// tcpServer accepts connections on h:port until the test ends; each
// reads a request of reqSize bytes, answers respSize bytes and reads on
// until the client closes (FIN or RST), then closes its side.
func tcpServer(t *testing.T, h *testhost.Host, port, reqSize, respSize int) {
	t.Helper()
	var ln *net.TCPListener
	err := h.Do(func() (err error) {
		ln, err = net.ListenTCP("tcp", &net.TCPAddr{Port: port})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.AcceptTCP()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				if _, err := io.ReadFull(c, make([]byte, reqSize)); err != nil {
					return
				}
				if _, err := c.Write(make([]byte, respSize)); err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<20)) // to EOF or reset
			}()
		}
	}()
}

// tcpClient opens a connection from h to dst, sends reqSize bytes,
// reads respSize and closes: with FIN, or with RST (linger 0) if rst.
// It returns the client's port.
func tcpClient(t *testing.T, h *testhost.Host, dst netip.AddrPort, reqSize, respSize int, rst bool) uint16 {
	t.Helper()
	var port uint16
	err := h.Do(func() error {
		d := net.Dialer{Timeout: 10 * time.Second}
		nc, err := d.Dial("tcp", dst.String())
		if err != nil {
			return err
		}
		c := nc.(*net.TCPConn)
		defer c.Close()
		port = uint16(c.LocalAddr().(*net.TCPAddr).Port)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(make([]byte, reqSize)); err != nil {
			return err
		}
		if _, err := io.ReadFull(c, make([]byte, respSize)); err != nil {
			return err
		}
		if rst {
			return c.SetLinger(0) // Close sends a reset
		}
		if err := c.CloseWrite(); err != nil {
			return err
		}
		// Wait for the server's FIN, so the close is a full FIN exchange.
		if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
			return fmt.Errorf("after our FIN: read %d bytes, %v; want EOF", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return port
}
