package query

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/store"
)

// exportRecs are randRecords with every field the store keeps in use on
// some: NAT, verdicts, conntrack marks, workloads and services, nodes,
// and duplicates (two records with the same key and times: distinct
// records that must stay two).
func exportRecs(r *rand.Rand, n int) []flow.Record {
	recs := randRecords(r, n)
	web := &flow.Workload{Name: "web-1", Namespace: "shop", Node: "n1"}
	svc := &flow.Service{Name: "shop/cart", Backends: "10.244.1.5:8080", Group: "g"}
	for i := range recs {
		rec := &recs[i]
		rec.EndReason = flow.EndReason(1 + i%6)
		if rec.Key.Proto == 6 {
			rec.TCPFlags, rec.RevTCPFlags = 0x1b, 0x12
		}
		if i%7 == 0 {
			rec.PostNAT = rec.Key
			rec.PostNAT.SrcPort, rec.PostNAT.DstPort = 61000, 8443
			rec.PostNAT.DstAddr[15] ^= 1
			rec.Mark, rec.Zone = uint32(i%5), uint16(i%3)
		}
		if i%11 == 0 {
			rec.Verdict, rec.Rule = flow.VerdictDeny, "weir-deny"
		}
		if i%5 == 0 {
			rec.SrcWorkload, rec.Service, rec.ServiceMatch = web, svc, flow.ServiceMatchVIP
		}
	}
	for i := 0; i+1 < n; i += 101 { // exact duplicates
		recs[i+1] = recs[i]
	}
	return recs
}

// collect is a sink keeping copies of what it is given (as the sink
// contract requires: the batch is reused).
type collect struct {
	recs    []flow.Record
	batches int
	err     error
}

func (c *collect) Write(recs []flow.Record) error {
	c.recs = append(c.recs, recs...)
	c.batches++
	return c.err
}
func (c *collect) Close() error { return nil }

// recText is a record as comparable text: pointers by what they point to.
func recText(r *flow.Record) string {
	return string(format.AppendJSON(nil, r))
}

// sameRecords compares two multisets of records.
func sameRecords(t *testing.T, what string, got, want []flow.Record) {
	t.Helper()
	g, w := make([]string, len(got)), make([]string, len(want))
	for i := range got {
		g[i] = recText(&got[i])
	}
	for i := range want {
		w[i] = recText(&want[i])
	}
	slices.Sort(g)
	slices.Sort(w)
	if len(g) != len(w) {
		t.Fatalf("%s: %d records, want %d", what, len(g), len(w))
	}
	for i := range g {
		if g[i] != w[i] {
			t.Fatalf("%s: record %d:\n got %s\nwant %s", what, i, g[i], w[i])
		}
	}
}

// TestExportExact: exporting a whole store gives back exactly the
// records written, every field, duplicates as two records (nothing
// merged), and the per-flow sums of packets and bytes; the batches are
// at most Export.Batch records.
func TestExportExact(t *testing.T) {
	recs := exportRecs(rand.New(rand.NewPCG(3, 9)), 5000)
	s := writeStore(t, recs, 700)
	var got collect
	st, err := ExportRecords(context.Background(), s, &Export{Batch: 333}, &got)
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != int64(len(recs)) || st.RowsScanned != int64(len(recs)) || st.BlocksSkipped != 0 || st.BlocksCorrupt != 0 {
		t.Errorf("stats %+v", st)
	}
	if want := (len(recs) + 332) / 333; got.batches < want {
		t.Errorf("%d batches for %d records of at most 333", got.batches, len(recs))
	}
	sameRecords(t, "whole store", got.recs, recs)
	type sums struct{ n, pkts, bytes, rpkts, rbytes uint64 }
	perFlow := func(rs []flow.Record) map[flow.Key]sums {
		m := map[flow.Key]sums{}
		for _, r := range rs {
			s := m[r.Key]
			s.n++
			s.pkts, s.bytes, s.rpkts, s.rbytes = s.pkts+r.Packets, s.bytes+r.Bytes, s.rpkts+r.RevPackets, s.rbytes+r.RevBytes
			m[r.Key] = s
		}
		return m
	}
	pg, pw := perFlow(got.recs), perFlow(recs)
	if len(pg) != len(pw) {
		t.Fatalf("%d flows, want %d", len(pg), len(pw))
	}
	for k, w := range pw {
		if pg[k] != w {
			t.Fatalf("flow %v: %+v, want %+v", k, pg[k], w)
		}
	}
}

// TestExportSelect: the time range ([From, To) by Start), interfaces and
// conditions select exactly the records the reference semantics do;
// blocks the summaries rule out are skipped unread.
func TestExportSelect(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	recs := exportRecs(r, 4000)
	s := writeStore(t, recs, 500)
	skipped := 0
	n := 60
	if raceEnabled {
		n = 12
	}
	for i := range n {
		rc := randCond(r, 2)
		cond, err := ParseCondition(rc.text)
		if err != nil {
			t.Fatalf("%q: %v", rc.text, err)
		}
		x := &Export{Cond: cond, Batch: 1 + r.IntN(700)}
		if r.IntN(2) == 0 {
			x.From = time.Unix(0, t0+int64(r.IntN(30))*int64(time.Hour))
		}
		if r.IntN(2) == 0 {
			x.To = time.Unix(0, recs[r.IntN(len(recs))].Start) // a record starting exactly there is out
		}
		if r.IntN(4) == 0 {
			x.Ifaces = []string{ifPool[r.IntN(len(ifPool))]}
		}
		from, to := bounds(&Query{From: x.From, To: x.To})
		var want []flow.Record
		for j := range recs {
			rec := &recs[j]
			if rec.Start >= from && rec.Start < to && (len(x.Ifaces) == 0 || slices.Contains(x.Ifaces, rec.Iface)) && rc.eval(rec) {
				want = append(want, *rec)
			}
		}
		var got collect
		st, err := ExportRecords(context.Background(), s, x, &got)
		if err != nil {
			t.Fatal(err)
		}
		skipped += st.BlocksSkipped
		if st.Records != int64(len(want)) {
			t.Fatalf("export %d %q: %d records, want %d", i, rc.text, st.Records, len(want))
		}
		sameRecords(t, fmt.Sprintf("export %d %q", i, rc.text), got.recs, want)
	}
	if skipped == 0 {
		t.Error("no export skipped a block by its summaries")
	}
}

// TestExportSinkError: a failing sink ends the export with its error,
// marked ErrExportSink; a cancelled context ends it too.
func TestExportSinkError(t *testing.T) {
	s := writeStore(t, exportRecs(rand.New(rand.NewPCG(1, 2)), 2000), 500)
	boom := errors.New("disk full")
	sink := &collect{err: boom}
	st, err := ExportRecords(context.Background(), s, &Export{Batch: 100}, sink)
	if !errors.Is(err, boom) || !errors.Is(err, ErrExportSink) || sink.batches != 1 || st.Records != 0 {
		t.Errorf("%v after %d batches, %d records", err, sink.batches, st.Records)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ExportRecords(ctx, s, &Export{}, &collect{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestExportFormats: JSON lines are weir's records (they read back as
// the records written); CSV has the header's columns on every line, and
// its cells say what the records hold.
func TestExportFormats(t *testing.T) {
	recs := exportRecs(rand.New(rand.NewPCG(4, 4)), 600)
	recs[3].Rule = "a,\"b\"\x1b[2J" // a hostile rule: quoted, escaped
	recs[3].Verdict = flow.VerdictDeny
	s := writeStore(t, recs, 600)
	var js, cs bytes.Buffer
	j := format.NewJSON(&js)
	if _, err := ExportRecords(context.Background(), s, &Export{}, j); err != nil {
		t.Fatal(err)
	}
	j.Close()
	back, err := ReadRecords(&js, 1000)
	if err != nil || len(back) != len(recs) {
		t.Fatalf("JSON read back: %d records, %v", len(back), err)
	}
	c := NewRecordCSV(&cs)
	if _, err := ExportRecords(context.Background(), s, &Export{}, c); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if strings.Contains(cs.String(), "\x1b") {
		t.Error("CSV holds a raw escape")
	}
	rows, err := csv.NewReader(&cs).ReadAll()
	if err != nil || len(rows) != len(recs)+1 || !slices.Equal(rows[0], RecordCSVHeader) {
		t.Fatalf("CSV: %d rows, %v, header %q", len(rows), err, rows[0])
	}
	col := func(name string) int { return slices.Index(RecordCSVHeader, name) }
	var pk, nat, denied, nodes int
	byRule := map[string]bool{}
	for _, row := range rows[1:] {
		if len(row) != len(RecordCSVHeader) {
			t.Fatalf("CSV row of %d cells: %q", len(row), row)
		}
		var p uint64
		fmt.Sscan(row[col("packets")], &p)
		pk += int(p)
		if row[col("nat_dst_ip")] != "" {
			nat++
			if _, err := netip.ParseAddr(row[col("nat_dst_ip")]); err != nil {
				t.Errorf("nat_dst_ip %q", row[col("nat_dst_ip")])
			}
		}
		if row[col("verdict")] == "deny" {
			denied++
			byRule[row[col("rule")]] = true
		}
		if row[col("node")] != "" {
			nodes++
		}
	}
	var wpk, wnat, wden, wnodes int
	for _, r := range recs {
		wpk += int(r.Packets)
		if r.NATed() {
			wnat++
		}
		if r.Verdict == flow.VerdictDeny {
			wden++
		}
		if r.Node != "" {
			wnodes++
		}
	}
	if pk != wpk || nat != wnat || denied != wden || nodes != wnodes || !byRule[`a,"b"\x1b[2J`] {
		t.Errorf("CSV: %d packets (want %d), %d NATed (%d), %d denied (%d), %d with a node (%d), rules %v",
			pk, wpk, nat, wnat, denied, wden, nodes, wnodes, byRule)
	}
}

// heapSink measures the live heap after a collection every few batches
// and keeps the largest.
type heapSink struct {
	n, every int
	max      uint64
	records  int
}

func (h *heapSink) Write(recs []flow.Record) error {
	h.records += len(recs)
	if h.n++; h.n%h.every == 0 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		h.max = max(h.max, m.HeapInuse)
	}
	return nil
}
func (h *heapSink) Close() error { return nil }

// TestExportMemory: the heap an export holds does not grow with the
// number of records exported: the largest live heap seen while exporting
// 200k records is within 4 MiB of the one while exporting 20k (the same
// blocks' size, ten times as many of them; 50k and 5k under the race
// detector). The store's list of blocks is the only thing that grows (its
// headers and summaries: about 3.5 KiB a block here).
func TestExportMemory(t *testing.T) {
	peak := func(n int) (uint64, int) {
		g := rand.New(rand.NewPCG(uint64(n), 1))
		dir := t.TempDir()
		s, err := store.Open(store.Config{Dir: dir, NoSync: true, Writeout: time.Hour, CloseTimeout: time.Minute}) // a loaded machine: the bound has its own tests
		if err != nil {
			t.Fatal(err)
		}
		const per = 5000
		base := exportRecs(g, per)
		batch := make([]flow.Record, per)
		for i := 0; i < n; i += per {
			copy(batch, base)
			for j := range batch {
				batch[j].Start += int64(i/per) * int64(time.Minute)
				batch[j].End += int64(i/per) * int64(time.Minute)
			}
			if err := s.Write(batch); err != nil {
				t.Fatal(err)
			}
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		ro, err := store.OpenReadOnly(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		h := &heapSink{every: 4}
		j := format.NewJSON(io.Discard)
		st, err := ExportRecords(context.Background(), ro, &Export{Batch: 1024}, sinkPair{h, j})
		if err != nil || st.Records != int64(n) || h.records != n {
			t.Fatalf("%d records: %v, %+v", n, err, st)
		}
		return h.max, st.Blocks
	}
	n := 20_000
	if raceEnabled {
		n = 5_000
	}
	small, bs := peak(n)
	large, bl := peak(10 * n)
	t.Logf("largest live heap: %d KiB exporting %d records (%d blocks), %d KiB exporting %d (%d blocks)", small>>10, n, bs, large>>10, 10*n, bl)
	if large > small+4<<20 {
		t.Errorf("exporting %d records held %d KiB, %d %d KiB: grows with the export", 10*n, large>>10, n, small>>10)
	}
}

// sinkPair writes to both sinks.
type sinkPair struct {
	a, b interface{ Write([]flow.Record) error }
}

func (p sinkPair) Write(recs []flow.Record) error {
	if err := p.a.Write(recs); err != nil {
		return err
	}
	return p.b.Write(recs)
}
func (p sinkPair) Close() error { return nil }
