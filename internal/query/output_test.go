package query

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/httpauth"
	"github.com/weir-dev/weir/internal/store"
)

func sampleResult(t *testing.T) *Result {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	recs := randRecords(r, 2000)
	for i := range recs { // output without drops: exactly as before drops existed
		recs[i].DropPackets, recs[i].DropBytes, recs[i].DropReason, recs[i].Sampling = 0, 0, "", 0
	}
	s := writeStore(t, recs, 1000)
	cond, _ := ParseCondition("proto tcp")
	q := &Query{Group: []Attr{AttrSrcIP, AttrDstPort, AttrProto}, Cond: cond, Limit: 5}
	res, err := Run(context.Background(), s, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 5 {
		t.Fatalf("%d rows", len(res.Rows))
	}
	return res
}

// TestOutputFormats: JSON and CSV carry the exact numbers of the rows and
// totals; the table is aligned and in human units.
func TestOutputFormats(t *testing.T) {
	res := sampleResult(t)
	var js bytes.Buffer
	if err := res.Write(&js, JSON); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Query struct {
			Group     []string
			Condition string
		}
		Rows []struct {
			SIP        string `json:"sip"`
			DPort      uint16 `json:"dport"`
			Proto      uint8  `json:"proto"`
			BytesOut   uint64 `json:"bytes_out"`
			BytesIn    uint64 `json:"bytes_in"`
			PacketsOut uint64 `json:"packets_out"`
			Flows      uint64 `json:"flows"`
			DIP        *string
		}
		Totals struct {
			Flows uint64 `json:"flows"`
		}
		Stats struct {
			RowsMatched int64 `json:"rows_matched"`
		}
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, js.String())
	}
	if strings.Contains(js.String(), "drop") {
		t.Errorf("JSON without drops mentions them:\n%s", js.String())
	}
	if strings.Join(doc.Query.Group, ",") != "sip,dport,proto" || doc.Query.Condition != "proto = tcp" {
		t.Errorf("query echoed as %+v", doc.Query)
	}
	if len(doc.Rows) != len(res.Rows) || doc.Totals.Flows != res.Totals.Flows || doc.Stats.RowsMatched != int64(res.Totals.Flows) {
		t.Fatalf("json rows %d totals %d matched %d; result %d rows, %d flows", len(doc.Rows), doc.Totals.Flows, doc.Stats.RowsMatched, len(res.Rows), res.Totals.Flows)
	}
	for i, j := range doc.Rows {
		r := res.Rows[i]
		if j.SIP != r.SrcIP.String() || j.DPort != r.DstPort || j.Proto != 6 || j.BytesOut != r.Bytes || j.BytesIn != r.RevBytes ||
			j.PacketsOut != r.Packets || j.Flows != r.Flows || j.DIP != nil {
			t.Errorf("json row %d = %+v, result %+v", i, j, r)
		}
	}

	var cs bytes.Buffer
	if err := res.Write(&cs, CSV); err != nil {
		t.Fatal(err)
	}
	lines, err := csv.NewReader(&cs).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(lines[0], ",") != "sip,dport,proto,flows,packets_out,packets_in,bytes_out,bytes_in" || len(lines) != 1+len(res.Rows) {
		t.Fatalf("csv header %v, %d lines", lines[0], len(lines))
	}
	for i, l := range lines[1:] {
		r := res.Rows[i]
		want := []string{r.SrcIP.String(), strconv.Itoa(int(r.DstPort)), "6", strconv.FormatUint(r.Flows, 10),
			strconv.FormatUint(r.Packets, 10), strconv.FormatUint(r.RevPackets, 10), strconv.FormatUint(r.Bytes, 10), strconv.FormatUint(r.RevBytes, 10)}
		if !slices.Equal(l, want) {
			t.Errorf("csv line %d = %v, want %v", i, l, want)
		}
	}

	var tb bytes.Buffer
	if err := res.Write(&tb, Table); err != nil {
		t.Fatal(err)
	}
	tl := strings.Split(tb.String(), "\n")
	if !strings.Contains(tl[0], "sip") || !strings.Contains(tl[0], "bytes out") || strings.Contains(tl[0], "drop") {
		t.Errorf("table header %q", tl[0])
	}
	width := len(tl[0])
	for _, l := range tl[1 : 2+len(res.Rows)] { // rows and the total line align with the header
		if len(l) != width {
			t.Errorf("table line %q is %d wide, header %d", l, len(l), width)
		}
	}
	if !strings.Contains(tb.String(), "5 of ") || !strings.Contains(tl[len(res.Rows)+1], "total") {
		t.Errorf("table lacks the total or summary:\n%s", tb.String())
	}
}

// TestLive: flows served by a capture's /flows/live (written by the real
// JSON sink) are added to the stored ones, exactly.
func TestLive(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	stored, live := randRecords(r, 3000), randRecords(r, 500)
	s := writeStore(t, stored, 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var b []byte
		for i := range live {
			b = append(format.AppendJSON(b, &live[i]), '\n')
		}
		w.Write(b)
	}))
	defer srv.Close()
	got, err := FetchLive(context.Background(), srv.URL+"/flows/live")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(live) {
		t.Fatalf("%d live records, want %d", len(got), len(live))
	}
	cond, _ := ParseCondition("not dport 22")
	q := &Query{Group: []Attr{AttrIface, AttrSrcIP, AttrDstIP}, Cond: cond, Ifaces: []string{"eth0", "wg0"}}
	res, err := Run(context.Background(), s, q, got)
	if err != nil {
		t.Fatal(err)
	}
	wantRows, wantTot := reference(q, func(rec *flow.Record) bool { return rec.Key.DstPort != 22 }, append(stored, live...))
	if res.Totals != wantTot || !slices.Equal(res.Rows, wantRows) {
		t.Fatalf("with live: totals %+v, want %+v (%d rows, want %d)", res.Totals, wantTot, len(res.Rows), len(wantRows))
	}
	n := 0
	for _, rec := range live {
		if rec.Iface != "eth1" {
			n++
		}
	}
	if res.Stats.LiveRecords != n || res.Stats.RowsMatched != int64(res.Totals.Flows) {
		t.Errorf("LiveRecords = %d, want %d; RowsMatched %d, want %d (stored and live)", res.Stats.LiveRecords, n, res.Stats.RowsMatched, res.Totals.Flows)
	}
}

// TestLiveLoopbackOnly: --live never reaches beyond this host.
func TestLiveLoopbackOnly(t *testing.T) {
	for _, u := range []string{"http://192.0.2.1:9464/flows/live", "http://example.com/flows/live", "ftp://127.0.0.1/x", "::"} {
		if _, err := FetchLive(context.Background(), u); err == nil || !strings.Contains(err.Error(), "loopback") && !strings.Contains(err.Error(), "not an http URL") {
			t.Errorf("%s: %v", u, err)
		}
	}
	if _, err := ReadRecords(strings.NewReader(`{"src_ip":"10.0.0.1","dst_ip":"::1"}`+"\n"), 10); err == nil {
		t.Error("mixed families accepted")
	}
	if _, err := ReadRecords(strings.NewReader(strings.Repeat(`{"src_ip":"10.0.0.1","dst_ip":"10.0.0.2"}`+"\n", 3)), 2); err == nil {
		t.Error("more than the limit accepted")
	}
}

// FuzzReadRecords: whatever a live endpoint sends, ReadRecords returns an
// error or at most limit records of one address family each; never a panic.
func FuzzReadRecords(f *testing.F) {
	rec := flow.Record{Packets: 3, Bytes: 180, Iface: "eth0", Start: 1, End: 2}
	rec.Key.IPVersion = 4
	f.Add(string(format.AppendJSON(nil, &rec)) + "\n")
	f.Add(`{"src_ip":"::1","dst_ip":"::2","proto":58,"icmp_type":128}` + "\n\n")
	f.Add(`{"src_ip":"10.0.0.1","dst_ip":"::2"}`)
	f.Add(`{"packets":-1}`)
	f.Add("[1,2,3]\n{")
	f.Fuzz(func(t *testing.T, s string) {
		recs, err := ReadRecords(strings.NewReader(s), 4)
		if err != nil {
			return
		}
		if len(recs) > 4 {
			t.Fatalf("%d records past the limit", len(recs))
		}
		for _, r := range recs {
			if r.Key.IPVersion != 4 && r.Key.IPVersion != 6 {
				t.Fatalf("IP version %d", r.Key.IPVersion)
			}
		}
	})
}

// TestLiveSnapshot: a capture's endpoint serves records still pending in
// its store; a writeout that commits them while they are fetched makes
// LiveSnapshot fetch again, so each record is counted exactly once.
func TestLiveSnapshot(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	stored, pending := randRecords(r, 1000), randRecords(r, 300)
	s := writeStore(t, stored, 500)
	if err := s.Write(pending); err != nil { // buffered: not in any block yet
		t.Fatal(err)
	}
	fetches := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches++
		var b []byte
		s.Pending(func(rec *flow.Record) { b = append(format.AppendJSON(b, rec), '\n') })
		if fetches == 1 {
			if err := s.Flush(); err != nil { // the writeout lands mid-fetch
				t.Error(err)
			}
		}
		w.Write(b)
	}))
	defer srv.Close()
	ro, err := store.OpenReadOnly(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	live, blocks, err := LiveSnapshot(context.Background(), ro, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if fetches != 2 || len(live) != 0 {
		t.Fatalf("%d fetches, %d live records; want 2 fetches, the second with nothing pending", fetches, len(live))
	}
	q := &Query{Group: []Attr{AttrSrcIP}, Blocks: blocks}
	res, err := Run(context.Background(), ro, q, live)
	if err != nil {
		t.Fatal(err)
	}
	_, want := reference(q, func(*flow.Record) bool { return true }, append(stored, pending...))
	if res.Totals != want {
		t.Errorf("totals %+v, want %+v (each record once)", res.Totals, want)
	}
}

// TestLiveToken: FetchLive sends the bearer token; a capture behind
// httpauth answers it, and a missing or wrong token is an error that says
// which flag to give.
func TestLiveToken(t *testing.T) {
	live := randRecords(rand.New(rand.NewPCG(5, 6)), 10)
	tokFile := filepath.Join(t.TempDir(), "token")
	const tok = "live-token-0123456789abcdef"
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := httpauth.Listen(httpauth.Config{Addr: "127.0.0.1:0", TokenFile: tokFile})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: httpauth.Middleware(ln.Token, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var b []byte
		for i := range live {
			b = append(format.AppendJSON(b, &live[i]), '\n')
		}
		w.Write(b)
	}), nil)}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/flows/live"
	for _, c := range []struct {
		token, err string
	}{
		{"", "401 Unauthorized: the capture asks for its token: give --api-token-file"},
		{"wrong-token-0123456789", "401 Unauthorized: the capture refused the token of --api-token-file"},
		{tok, ""},
	} {
		got, err := FetchLiveAuth(context.Background(), url, LiveAuth{Token: c.token})
		if c.err == "" && (err != nil || len(got) != len(live)) || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("token %q: %d records, %v; want %q", c.token, len(got), err, c.err)
		}
	}
}
