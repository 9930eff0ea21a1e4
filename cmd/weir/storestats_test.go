//go:build linux

package main

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStoreStatsLostAtExit: a collector whose store took every record
// (buffered for a writeout 5 minutes away) but whose Close never returns
// is stopped with SIGTERM: weir gives up on the store after the grace and
// its --stats store line counts every buffered record as lost at exit,
// with 0 written, 0 failed writes.
func TestStoreStatsLostAtExit(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := weirProcess(t, "hangclose", "collect", "--listen", "tcp://"+addr, "-o", "none", "--stats",
		"--metrics-addr", "off", "--data-dir", filepath.Join(t.TempDir(), "data"))
	stderr := p.stderr
	waitFor(t, 20*time.Second, "the collector to listen", func() bool { return strings.Contains(stderr.String(), "listening on tcp") }, stderr.String)
	code, _, errs := runCLI("capture", "--synthetic", "flows=3000,packets=6000", "-o", "none", "--stats", "--export", "ipfix+tcp://"+addr)
	if code != exitOK || !strings.Contains(errs, "0 records undelivered") {
		t.Fatalf("exporter: exit %d\n%s", code, errs)
	}
	flows := statCount(t, errs, "export:")
	// The store's queue has handed every record to the store once the
	// collector's SIGTERM grace starts; give it the time to take them.
	time.Sleep(time.Second)
	sigtermWithin(t, p)
	errs = p.stderr.String()
	want := fmt.Sprintf("store: 0 records in 0 blocks (0 B) written to %s", "")
	line := ""
	for _, s := range strings.Split(errs, "\n") {
		if strings.HasPrefix(s, "store: ") {
			line = s
		}
	}
	if !strings.HasPrefix(line, want) || !strings.Contains(line, fmt.Sprintf(", %d records still buffered at exit (lost), 0 failed writes", flows)) {
		t.Errorf("store line %q; want %d records still buffered at exit (lost)\n%s", line, flows, errs)
	}
}
