package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/api"
	"github.com/weir-dev/weir/internal/store"
)

// gendbStore writes a small generated store (two interfaces, two days)
// with 'weir bench gendb' and returns its directory.
func gendbStore(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	code, _, errs := runCLI("bench", "gendb", "--data-dir", dir, "--days", "2", "--blocks-per-day", "24",
		"--flows-per-block", "300", "--clients", "400", "--servers", "50", "--ifaces", "eth0,eth1", "--seed", "3", "--no-sync")
	if code != exitOK {
		t.Fatalf("gendb: %s", errs)
	}
	return dir
}

var elapsedMS = regexp.MustCompile(`"elapsed_ms": [0-9.e+-]+`)

// TestServeMatchesCLI: for every query shape, GET /api/v1/query answers
// byte for byte what 'weir query -o json' prints on the same store (but
// the elapsed time, which no two runs share), and a mistake in the
// group-by or the condition carries the message and caret the CLI prints.
func TestServeMatchesCLI(t *testing.T) {
	dir := gendbStore(t)
	st, err := store.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := api.New(api.Config{Backend: api.NewStoreBackend(st, nil), NoConsole: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	getAPI := func(params url.Values) (int, []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/api/v1/query?"+params.Encode(), nil)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}

	// Each shape: the CLI's arguments after 'weir query -d DIR -o json',
	// and the same question as API parameters.
	shapes := []struct {
		cli []string
		api url.Values
	}{
		{[]string{"sip"}, url.Values{"group": {"sip"}}},
		{[]string{"dip"}, url.Values{"group": {"dip"}}},
		{[]string{"talk_conv"}, url.Values{"group": {"talk_conv"}}},
		{[]string{"apps_port"}, url.Values{"group": {"apps_port"}}},
		{[]string{"-n", "3", "raw"}, url.Values{"group": {"raw"}, "limit": {"3"}}},
		{[]string{"sip,dip,dport,proto", "-n", "25"}, url.Values{"group": {"sip,dip,dport,proto"}, "limit": {"25"}}},
		{[]string{"iface,proto"}, url.Values{"group": {"iface,proto"}}},
		{[]string{"sport"}, url.Values{"group": {"sport"}}},
		{[]string{"-n", "0", "proto"}, url.Values{"group": {"proto"}, "limit": {"0"}}},
		{[]string{"time"}, url.Values{"group": {"time"}}},
		{[]string{"--resolution", "1h", "-n", "2", "sip"}, url.Values{"group": {"sip"}, "resolution": {"1h"}, "limit": {"2"}}},
		{[]string{"--resolution", "6h", "iface"}, url.Values{"group": {"iface"}, "resolution": {"6h"}}},
		{[]string{"time,dport", "-n", "1"}, url.Values{"group": {"time,dport"}, "limit": {"1"}}},
		{[]string{"sip", "dport = 443"}, url.Values{"group": {"sip"}, "condition": {"dport = 443"}}},
		{[]string{"sip", "-c", "dport https and not snet 10.0.0.0/30"}, url.Values{"group": {"sip"}, "condition": {"dport https and not snet 10.0.0.0/30"}}},
		{[]string{"dip", "(port 22 or port 53) && proto udp"}, url.Values{"group": {"dip"}, "condition": {"(port 22 or port 53) && proto udp"}}},
		{[]string{"dport", "host 2001:db8:5::/48"}, url.Values{"group": {"dport"}, "condition": {"host 2001:db8:5::/48"}}},
		{[]string{"sip", "icmp"}, url.Values{"group": {"sip"}, "condition": {"icmp"}}},
		{[]string{"sip", "dport > 1000", "and", "dport <= 9092"}, url.Values{"group": {"sip"}, "condition": {"dport > 1000 and dport <= 9092"}}},
		{[]string{"sip", "iface = eth1"}, url.Values{"group": {"sip"}, "condition": {"iface = eth1"}}},
		{[]string{"sip", "sip = 192.0.2.1"}, url.Values{"group": {"sip"}, "condition": {"sip = 192.0.2.1"}}}, // nothing matches
		{[]string{"-s", "packets", "dip"}, url.Values{"group": {"dip"}, "sort": {"packets"}}},
		{[]string{"-s", "bytes:in", "dip"}, url.Values{"group": {"dip"}, "sort": {"bytes:in"}}},
		{[]string{"-s", "packets:out", "--ascending", "sip"}, url.Values{"group": {"sip"}, "sort": {"packets:out"}, "ascending": {"true"}}},
		{[]string{"-s", "flows", "dport,proto"}, url.Values{"group": {"dport,proto"}, "sort": {"flows"}}},
		{[]string{"-s", "drop_bytes", "sip"}, url.Values{"group": {"sip"}, "sort": {"drop_bytes"}}},
		{[]string{"-i", "eth0", "sip"}, url.Values{"group": {"sip"}, "iface": {"eth0"}}},
		{[]string{"-i", "eth0,eth1", "iface"}, url.Values{"group": {"iface"}, "iface": {"eth0,eth1"}}},
		{[]string{"-i", "eth1", "-i", "eth0", "iface"}, url.Values{"group": {"iface"}, "iface": {"eth1", "eth0"}}},
		{[]string{"-f", "2026-01-01T06:00:00Z", "-t", "2026-01-01T18:00:00Z", "sip"}, url.Values{"group": {"sip"}, "from": {"2026-01-01T06:00:00Z"}, "to": {"2026-01-01T18:00:00Z"}}},
		{[]string{"-f", "2026-01-02", "talk_dst"}, url.Values{"group": {"talk_dst"}, "from": {"2026-01-02"}}},
		{[]string{"-t", "1767243600", "sip"}, url.Values{"group": {"sip"}, "to": {"1767243600"}}},
		{[]string{"-f", "2026-01-01 12:00", "-t", "2026-01-01 13:00", "--resolution", "10m", "dport"}, url.Values{"group": {"dport"}, "from": {"2026-01-01 12:00"}, "to": {"2026-01-01 13:00"}, "resolution": {"10m"}}},
		{[]string{"-f", "2030-01-01", "sip"}, url.Values{"group": {"sip"}, "from": {"2030-01-01"}}}, // nothing stored then
	}
	rowsSeen := 0
	for _, c := range shapes {
		code, out, errs := runCLI(append([]string{"query", "-d", dir, "-o", "json"}, c.cli...)...)
		if code != exitOK {
			t.Fatalf("weir query %v: %d %s", c.cli, code, errs)
		}
		status, body := getAPI(c.api)
		if status != http.StatusOK {
			t.Fatalf("%v: %d %s", c.api, status, body)
		}
		cli, got := elapsedMS.ReplaceAllString(out, `"elapsed_ms": 0`), elapsedMS.ReplaceAll(body, []byte(`"elapsed_ms": 0`))
		if !bytes.Equal(got, []byte(cli)) {
			t.Errorf("%v: the API answered\n%s\nweir query printed\n%s", c.cli, got, cli)
		}
		var doc struct{ Rows []json.RawMessage }
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		rowsSeen += len(doc.Rows)
	}
	if rowsSeen < 200 {
		t.Errorf("only %d rows over all shapes: the comparison proves little", rowsSeen)
	}

	// Mistakes: the CLI's stderr is "weir query: WHAT: MSG\nCARET\n"; the
	// API's error has the same message and caret.
	for _, c := range []struct {
		cli   []string
		param string
		api   url.Values
	}{
		{[]string{"sip", "dport = 443 and dpor = 80"}, "condition", url.Values{"group": {"sip"}, "condition": {"dport = 443 and dpor = 80"}}},
		{[]string{"sip", "(host 10.0.0.1"}, "condition", url.Values{"group": {"sip"}, "condition": {"(host 10.0.0.1"}}},
		{[]string{"sip", "port = https2"}, "condition", url.Values{"group": {"sip"}, "condition": {"port = https2"}}},
		{[]string{"sip", "snet 10.0.0.0/33"}, "condition", url.Values{"group": {"sip"}, "condition": {"snet 10.0.0.0/33"}}},
		{[]string{"sip", "iface = é or"}, "condition", url.Values{"group": {"sip"}, "condition": {"iface = é or"}}},
		{[]string{"sip,dpot"}, "group", url.Values{"group": {"sip,dpot"}}},
	} {
		code, _, errs := runCLI(append([]string{"query", "-d", dir, "-o", "json"}, c.cli...)...)
		if code != exitUsage {
			t.Fatalf("weir query %v: %d %s", c.cli, code, errs)
		}
		status, body := getAPI(c.api)
		var e struct{ Error api.Error }
		if err := json.Unmarshal(body, &e); err != nil || status != http.StatusBadRequest {
			t.Fatalf("%v: %d %s", c.api, status, body)
		}
		what := map[string]string{"condition": "condition", "group": "group-by"}[c.param]
		want := "weir query: " + what + ": " + strings.TrimPrefix(e.Error.Message, c.param+": ") + "\n" + e.Error.Caret + "\n"
		if errs != want || e.Error.Caret == "" {
			t.Errorf("%v: the CLI printed\n%s\nthe API's error renders as\n%s", c.cli, errs, want)
		}
	}
}
