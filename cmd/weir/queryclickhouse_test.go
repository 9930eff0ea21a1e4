package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/clickhouse"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/gendb"
	"github.com/weir-dev/weir/internal/store"
	"github.com/weir-dev/weir/internal/testfleet"
	"github.com/weir-dev/weir/internal/wire"
)

// weir query --clickhouse answers as weir query over a store does: the
// same generated records in both, the same rows and totals for grouping,
// conditions, time ranges, resolution, sort, limit and every output
// format, and --list names the same interfaces with the same counts.
func TestQueryClickHouse(t *testing.T) {
	f := testfleet.Start(t, testfleet.ClickHouse)
	db := f.Database("weirq")
	conn, err := clickhouse.NewHTTP(f.ClickHouse, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := clickhouse.Setup(ctx, conn, clickhouse.Config{Database: db}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := store.Open(store.Config{Dir: dir, NoSync: true, Writeout: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var rows []byte
	err = gendb.Generate(gendb.Config{Days: 1, BlocksPerDay: 12, FlowsPerBlock: 200, Clients: 100, Servers: 10, Seed: 5, Ifaces: []string{"eth0", "eth1"}},
		func(_ int64, recs []flow.Record) error {
			for i := range recs {
				rows = wire.Append(rows, &recs[i])
			}
			if err := st.Write(recs); err != nil {
				return err
			}
			return st.Flush()
		})
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := clickhouse.InsertRows(ctx, conn, db, bytes.NewReader(rows)); err != nil {
		t.Fatal(err)
	}
	ch := []string{"--clickhouse", f.ClickHouse, "--clickhouse-database", db}
	for _, args := range [][]string{
		{"sip"},
		{"-n", "5", "talk_conv", "dport = 443 and not snet 10.0.0.0/30"},
		{"--resolution", "1h", "-n", "3", "-s", "packets:in", "dport,proto"},
		{"-i", "eth1", "iface"},
		{"-f", "2026-01-01T06:00:00Z", "-t", "2026-01-01T12:00:00Z", "-s", "flows", "--ascending", "sip"},
		{"-c", "proto = udp", "-n", "0", "dip"},
	} {
		var answers [2]struct{ Rows, Totals json.RawMessage }
		for i, where := range [][]string{ch, {"-d", dir}} {
			code, out, errs := runCLI(append(append([]string{"query", "-o", "json"}, where...), args...)...)
			if code != exitOK {
				t.Fatalf("query %v %v: exit %d: %s", where, args, code, errs)
			}
			if err := json.Unmarshal([]byte(out), &answers[i]); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(answers[0].Rows, answers[1].Rows) || !bytes.Equal(answers[0].Totals, answers[1].Totals) || len(answers[0].Rows) < 10 {
			t.Errorf("%v: ClickHouse answered\n%s %s\nthe store\n%s %s", args, answers[0].Rows, answers[0].Totals, answers[1].Rows, answers[1].Totals)
		}
		for _, format := range []string{"csv", "table"} {
			_, fromCH, _ := runCLI(append(append([]string{"query", "-o", format}, ch...), args...)...)
			_, fromStore, _ := runCLI(append([]string{"query", "-o", format, "-d", dir}, args...)...)
			if format == "table" { // the last line is what was read: blocks, time
				fromCH, fromStore = fromCH[:strings.LastIndex(fromCH, "\n\n")], fromStore[:strings.LastIndex(fromStore, "\n\n")]
			}
			if fromCH != fromStore || fromCH == "" {
				t.Errorf("%v -o %s: ClickHouse printed\n%s\nthe store\n%s", args, format, fromCH, fromStore)
			}
		}
	}
	var lists [2][]struct {
		Iface string
		Flows int64
	}
	for i, where := range [][]string{ch, {"-d", dir}} {
		code, out, errs := runCLI(append([]string{"query", "--list", "-o", "json"}, where...)...)
		if code != exitOK || json.Unmarshal([]byte(out), &lists[i]) != nil {
			t.Fatalf("--list %v: exit %d %s %s", where, code, out, errs)
		}
	}
	if len(lists[0]) != 2 || lists[0][0] != lists[1][0] || lists[0][1] != lists[1][1] {
		t.Errorf("--list: ClickHouse %+v, the store %+v", lists[0], lists[1])
	}
	code, _, errs := runCLI(append([]string{"query", "-d", dir}, append(ch, "sip")...)...)
	if code != exitUsage || !strings.Contains(errs, "without --data-dir") {
		t.Errorf("--clickhouse with --data-dir: exit %d %s", code, errs)
	}
	code, _, errs = runCLI("query", "--clickhouse", "http://127.0.0.1:1", "sip") // nothing listens there
	if code != exitFailure || !strings.Contains(errs, "--clickhouse http://127.0.0.1:1") {
		t.Errorf("--clickhouse without a server: exit %d %s", code, errs)
	}
}
