package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCollectAPIAddr: weir collect --api-addr answers the HTTP API of
// 'weir serve' from its own store while it runs: records exported to it
// are queried back by interface, and the console's page carries meta (no
// token); without a store it is a usage error.
func TestCollectAPIAddr(t *testing.T) {
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
	udp, api := free("udp"), free("tcp")
	done := make(chan string, 1)
	go func() {
		_, _, errs := runCLI("collect", "--listen", "udp://"+udp, "--duration", "2m", "--metrics-addr", "off", "-o", "none",
			"--data-dir", t.TempDir(), "--writeout", "100ms", "--api-addr", api)
		done <- errs
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + api + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(60 * time.Second) // generous: a loaded CI machine, -race
	for code, _ := get("/readyz"); code != 200; code, _ = get("/readyz") {
		if time.Now().After(deadline) {
			t.Fatalf("the API never answered:\n%s", <-done)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _, errs := runCLI("capture", "--synthetic", "flows=50,packets=500", "-o", "none", "--export", "ipfix+udp://"+udp); code != exitOK {
		t.Fatalf("capture --export: exit %d\n%s", code, errs)
	}
	var body string
	for code := 0; !strings.Contains(body, `"syn0"`); code, body = get("/api/v1/query?group=iface&from=2020-01-01T00:00:00Z") {
		if time.Now().After(deadline) {
			t.Fatalf("the collected records never showed in the API: %d %s\n%s", code, body, <-done)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Without a token the console's page carries meta (api.Config.InlineMeta).
	if code, page := get("/"); code != 200 || !strings.Contains(page, `<script id="weir-meta" type="application/json">{`) {
		t.Errorf("the console's page: %d, no meta in it", code)
	}
	// The agent holds SIGTERM from its start: it ends the collection.
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if errs := <-done; !strings.Contains(errs, "listening on udp") {
		t.Errorf("collect said:\n%s", errs)
	}
	code, _, errs := runCLI("collect", "--listen", "udp://127.0.0.1:0", "--data-dir", "off", "--metrics-addr", "off", "--api-addr", "127.0.0.1:0")
	if code != exitUsage || !strings.Contains(errs, "--api-addr answers from the store") {
		t.Errorf("--api-addr without a store: exit %d, %s", code, errs)
	}
}
