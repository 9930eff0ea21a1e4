package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-dev/weir/internal/api"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/query"
	"github.com/weir-dev/weir/internal/sink/kafka"
	"github.com/weir-dev/weir/internal/store"
)

// exportStore writes n records (Packets = 1..n, distinct) of two nodes,
// a second apart from 2026-02-01, plus a duplicate of the first, and
// returns the store's directory.
func exportStore(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	s, err := store.Open(store.Config{Dir: dir, NoSync: true, CloseTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	recs := make([]flow.Record, n)
	for i := range recs {
		r := &recs[i]
		r.Key.SetSrc(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}))
		r.Key.SetDst(netip.MustParseAddr("192.0.2.1"))
		r.Key.Proto, r.Key.SrcPort, r.Key.DstPort = 6, uint16(30000+i%1000), 443
		r.Packets, r.Bytes = uint64(i+1), uint64(i+1)*100
		r.Start, r.End = at+int64(i)*int64(time.Second), at+int64(i)*int64(time.Second)+int64(time.Millisecond)
		r.Iface, r.Node, r.EndReason = "eth0", []string{"node-a", "node-b"}[i%2], flow.ReasonIdle
	}
	recs = append(recs, recs[0]) // the same record twice: two records out
	if err := s.Write(recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExportCommand: weir export writes every stored record (a duplicate
// as two) as JSON lines and as CSV, selects by time range and condition,
// and refuses usage mistakes with exit 2.
func TestExportCommand(t *testing.T) {
	dir := exportStore(t, 300)
	var out, errb bytes.Buffer
	if code := run([]string{"export", "-d", dir}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	recs, err := query.ReadRecords(&out, 1000)
	if err != nil || len(recs) != 301 {
		t.Fatalf("%d JSON records: %v", len(recs), err)
	}
	var pk uint64
	nodes := map[string]int{}
	for _, r := range recs {
		pk += r.Packets
		nodes[r.Node]++
	}
	if pk != 300*301/2+1 || nodes["node-a"] != 151 || nodes["node-b"] != 150 {
		t.Errorf("packets %d, nodes %v", pk, nodes)
	}
	if !strings.Contains(errb.String(), "weir export: 301 records from 1 of 1 blocks") {
		t.Errorf("stderr: %s", errb.String())
	}

	out.Reset()
	errb.Reset()
	args := []string{"export", "-d", dir, "-o", "csv", "-f", "2026-02-01T00:01:00Z", "-t", "2026-02-01T00:02:00Z", "node", "=", "node-b"}
	if code := run(args, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil || len(rows) != 31 { // seconds 60..119, every other one
		t.Fatalf("CSV: %d rows, %v", len(rows), err)
	}
	for _, row := range rows[1:] {
		if row[17] != "node-b" || !strings.HasPrefix(row[13], "2026-02-01T00:01:") {
			t.Fatalf("row %q", row)
		}
	}

	for _, bad := range [][]string{
		{"export", "-d", dir, "-o", "none"},
		{"export", "-d", dir, "-o", "xml"},
		{"export", "-d", dir, "node <"},
		{"export", "-d", dir, "-f", "2026-02-02", "-t", "2026-02-01"},
		{"export", "-d", dir, "--export", "kafka://"},
	} {
		errb.Reset()
		if code := run(bad, &out, &errb); code != exitUsage {
			t.Errorf("%q: exit %d, want %d: %s", bad, code, exitUsage, errb.String())
		}
	}
	errb.Reset()
	if code := run([]string{"export", "-d", t.TempDir() + "/none"}, &out, &errb); code != exitFailure || !strings.Contains(errb.String(), "no flow store") {
		t.Errorf("missing store: exit %d: %s", code, errb.String())
	}
}

// TestExportKafka: weir export --export kafka:// delivers every record
// once (a Kafka broker of franz-go's kfake), with its node, and waits for
// the broker rather than drop when the records outnumber the sink's
// buffer (buffer-records=64, 2,001 records).
func TestExportKafka(t *testing.T) {
	const topic = "weir-backfill"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	dir := exportStore(t, 2000)
	var out, errb bytes.Buffer
	url := "kafka://" + addr + "/" + topic + "?buffer-records=64&linger=1ms"
	if code := run([]string{"export", "-d", dir, "-o", "none", "--export", url, "--batch", "50"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if out.Len() != 0 || !strings.Contains(errb.String(), "2001 records to "+url) || !strings.Contains(errb.String(), "; 0 undelivered") {
		t.Errorf("stdout %d bytes; stderr: %s", out.Len(), errb.String())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := map[uint64]int{}
	n := 0
	for n < 2001 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var rec flow.Record
			if _, err := kafka.Rows(r, &rec, func(rec *flow.Record) {
				if want := []string{"node-a", "node-b"}[(rec.Packets-1)%2]; rec.Node != want {
					t.Fatalf("record %d: node %q, want %q", rec.Packets, rec.Node, want)
				}
				seen[rec.Packets]++
				n++
			}); err != nil {
				t.Fatalf("undecodable message: %v", err)
			}
		})
	}
	if n != 2001 || len(seen) != 2000 || seen[1] != 2 {
		t.Errorf("%d records, %d distinct, record 1 %d times", n, len(seen), seen[1])
	}
}

// TestListNodes: weir query --list says which nodes each interface's
// records come from, in every output format.
func TestListNodes(t *testing.T) {
	dir := exportStore(t, 50)
	var out, errb bytes.Buffer
	if code := run([]string{"query", "-d", dir, "--list", "-o", "json"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var spans []api.IfaceSpan
	if err := json.Unmarshal(out.Bytes(), &spans); err != nil || len(spans) != 1 || !slices.Equal(spans[0].Nodes, []string{"node-a", "node-b"}) {
		t.Fatalf("%v %+v", err, spans)
	}
	for _, f := range []string{"table", "csv"} {
		out.Reset()
		if code := run([]string{"query", "-d", dir, "--list", "-o", f}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "node-a,node-b") {
			t.Errorf("%s: exit %d:\n%s", f, code, out.String())
		}
	}
}
