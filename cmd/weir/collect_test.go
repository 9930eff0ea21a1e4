package main

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/store"
)

// TestCollect: weir capture --export → weir collect over UDP and TCP
// stores every record (queried back from the collector's store), and
// --stats reports the messages; a bad --listen is a usage error.
func TestCollect(t *testing.T) {
	free := func(network string) string {
		if network == "udp" {
			c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			return c.LocalAddr().String()
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	udp, tcp := free("udp"), free("tcp")
	dir := t.TempDir()
	type result struct {
		code      int
		out, errs string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errs := runCLI("collect", "--listen", "udp://"+udp, "--listen", "tcp://"+tcp, "--duration", "3s",
			"--metrics-addr", "off", "-o", "none", "--stats", "--data-dir", dir)
		done <- result{code, out, errs}
	}()
	time.Sleep(300 * time.Millisecond) // the collector binds
	for _, to := range []string{"ipfix+udp://" + udp, "ipfix+tcp://" + tcp} {
		if code, _, errs := runCLI("capture", "--synthetic", "flows=400,packets=4000", "-o", "none", "--stats", "--export", to); code != exitOK ||
			!strings.Contains(errs, "400 records in") || !strings.Contains(errs, "0 records undelivered") {
			t.Fatalf("capture --export %s: exit %d\n%s", to, code, errs)
		}
	}
	r := <-done
	if r.code != exitOK || !strings.Contains(r.errs, "records     800 flows") {
		t.Fatalf("collect: exit %d\n%s", r.code, r.errs)
	}
	s, err := store.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	bl, err := s.Blocks(0, 0, nil)
	rows := 0
	for _, b := range bl {
		rows += b.Rows
	}
	if err != nil || rows != 800 {
		t.Errorf("store holds %d rows (%v), want 800", rows, err)
	}
	if code, _, errs := runCLI("collect", "--listen", "sctp://127.0.0.1:1", "--data-dir", "off"); code != exitUsage || !strings.Contains(errs, "--listen") {
		t.Errorf("bad --listen: exit %d, %s", code, errs)
	}
}
