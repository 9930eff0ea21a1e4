package clickhouse

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/gendb"
	"github.com/weir-dev/weir/internal/query"
	"github.com/weir-dev/weir/internal/store"
	"github.com/weir-dev/weir/internal/testfleet"
	"github.com/weir-dev/weir/internal/wire"
)

// day0 is the first generated block's start.
var day0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// equivRecords are gendb's records (IPv4 and IPv6, TCP, UDP, ICMP, two
// interfaces, a day) with NAT, drops, deny flows, marks, sampling and
// enrichment added to some, and three nodes, so that every attribute has
// several values.
func equivRecords(t *testing.T) []flow.Record {
	var out []flow.Record
	cfg := gendb.Config{Days: 1, BlocksPerDay: 48, FlowsPerBlock: 80, Clients: 60, Servers: 12, Ifaces: []string{"eth0", "eth1"}, Start: day0, IPv6Share: 0.1}
	err := gendb.Generate(cfg, func(_ int64, recs []flow.Record) error {
		out = append(out, recs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wls := []*flow.Workload{{Name: "web-1", Namespace: "prod", Node: "n1"}, {Name: "db-0", Namespace: "prod", Node: "n2"}, {Name: "job", Node: "n1"}}
	svc := &flow.Service{Name: "prod/web", Backends: "172.16.0.1:443", Group: "lb-a"}
	for i := range out {
		r := &out[i]
		if i%7 == 0 {
			n := r.Key
			n.SrcAddr[15] ^= 1
			n.DstPort = []uint16{80, 8080, 9090}[i%3]
			r.PostNAT, r.Mark, r.Zone = n, uint32(i%4), uint16(i%3)
		}
		if i%11 == 0 {
			r.DropPackets, r.DropBytes, r.DropReason = uint64(i%5+1), uint64(i%5+1)*60, []string{"NO_SOCKET", "NETFILTER_DROP"}[i%2]
		}
		if i%13 == 0 {
			r.Verdict, r.Rule = flow.VerdictDeny, []string{"weir-deny", "drop ssh"}[i%2]
		}
		if i%5 == 0 {
			r.SrcWorkload, r.DstWorkload = wls[i%3], wls[(i+1)%3]
		}
		if i%6 == 0 {
			r.Service, r.ServiceMatch = svc, flow.ServiceMatch(1+i%4)
		}
		if i%17 == 0 {
			r.Sampling = 100
		}
		r.Node = []string{"node-a", "node-b", "192.0.2.9"}[i/50%3] // runs, as from several agents' batches
	}
	return out
}

// testEquivalence: a few thousand records written to the embedded store
// and to ClickHouse give identical answers (rows, order, totals) to every
// query shape, from the table the planner says (rollups where exact).
func testEquivalence(t *testing.T, c Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	db := testfleet.Unique("weir_equiv") // runs on a shared fleet never see each other's rows
	defer Exec(context.Background(), c, NewStmt(false).S("DROP DATABASE IF EXISTS ", db))
	if _, err := Setup(ctx, c, Config{Database: db}); err != nil {
		t.Fatal(err)
	}
	f, err := Probe(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	recs := equivRecords(t)
	st, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Write(recs); err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	var rows bytes.Buffer
	for i := range recs {
		rows.Write(wire.Append(nil, &recs[i]))
	}
	if err := InsertRows(ctx, c, db, &rows); err != nil {
		t.Fatal(err)
	}
	at := func(h, m int) time.Time { return day0.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute) }
	for _, tc := range []struct {
		group, cond string
		from, to    time.Time
		res         time.Duration
		sort        string
		limit       int
		asc         bool
		ifaces      []string
		table       string
	}{
		{group: "sip", limit: 10, table: "flows_1h"},
		{group: "talk_conv", table: "flows_1h"},
		{group: "dport,proto", sort: "packets:in", limit: 5, table: "flows_1h"},
		{group: "time", res: time.Hour, from: at(2, 0), to: at(20, 0), table: "flows_1h"},
		{group: "time,dip", res: 5 * time.Minute, cond: "dport = 443", from: at(1, 0), to: at(9, 30), limit: 3, table: "flows_1m"},
		{group: "iface", ifaces: []string{"eth1"}, from: at(0, 10), table: "flows_1m"},
		{group: "sip", cond: "snet 10.0.0.0/24 and not port 22", sort: "flows", limit: 7, table: "flows"},
		{group: "dip", cond: "host 2001:db8:5::/64 or proto icmp", table: "flows_1h"},
		{group: "sip,dip", cond: "not host 172.16.0.0/12", from: at(3, 0), to: at(4, 0), table: "flows_1h"},
		{group: "drop_reason", cond: "drop_reason = no_socket or drop_reason = ''", sort: "drop_packets", table: "flows"},
		{group: "nat_dst_ip,nat_dst_port", cond: `nat_dst_ip != ""`, table: "flows"},
		{group: "nat_src_ip,proto", table: "flows"},
		{group: "sip", cond: "not nat_dst_port = 80", limit: 20, table: "flows"},
		{group: "dport", cond: "nat_dst_port >= 8080", table: "flows"},
		{group: "verdict,rule", cond: "verdict = deny or ct_mark > 1", table: "flows"},
		{group: "ct_mark,ct_zone", cond: "ct_zone != 0", table: "flows"},
		{group: "src_workload,src_namespace,src_node,service,service_match", cond: `service_match = vip or src_namespace = "prod"`, table: "flows"},
		{group: "dst_workload,dst_node,service_backends,service_group", cond: `dst_workload != ""`, table: "flows"},
		{group: "sampling,proto", sort: "flows", asc: true, limit: 3, table: "flows"},
		{group: "time", res: 10 * time.Second, cond: "sport > 50000", from: at(5, 0), to: at(5, 30), table: "flows"},
		{group: "time,sport", res: 30 * time.Minute, from: at(6, 0), to: at(12, 0), sort: "bytes:out", limit: 2, table: "flows"},
		{group: "raw", limit: 0, from: at(10, 0), to: at(11, 0), table: "flows_1m"}, // time bins of 5m
		{group: "sip,dip,sport,dport,proto", cond: "vlan = 0 and port != 53", from: at(7, 0), to: at(7, 45), table: "flows"},
		{group: "dip", cond: "dip = 172.16.0.1", from: at(0, 0).Add(time.Second), table: "flows"},
		{group: "sip", cond: "sip = 10.250.250.250", table: "flows_1h"}, // no match
		{group: "node,iface", table: "flows_1h"},
		{group: "time,node", res: time.Hour, cond: `node = "node-b" or node = 192.0.2.9`, limit: 2, table: "flows_1h"},
		{group: "node,src_workload", cond: `node != "node-a"`, table: "flows"},
	} {
		name := tc.group + " " + tc.cond
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			q := &query.Query{From: tc.from, To: tc.to, Resolution: tc.res, Limit: tc.limit, Ascending: tc.asc, Ifaces: tc.ifaces}
			var err error
			if q.Group, err = query.ParseGroupBy(tc.group); err != nil {
				t.Fatal(err)
			}
			if q.Cond, err = query.ParseCondition(tc.cond); err != nil {
				t.Fatal(err)
			}
			if tc.sort != "" {
				if q.Sort, q.Dir, err = query.ParseSort(tc.sort); err != nil {
					t.Fatal(err)
				}
			}
			want, err := query.Run(ctx, st, q, nil)
			if err != nil {
				t.Fatal(err)
			}
			p, err := translate(q, db, f)
			if err != nil {
				t.Fatal(err)
			}
			if p.Table() != tc.table {
				t.Errorf("planned on %s, want %s", p.Table(), tc.table)
			}
			got, err := Run(ctx, c, f, db, q)
			if err != nil {
				t.Fatalf("%v\n%s", err, p.stmt.SQL())
			}
			if got.Totals != want.Totals {
				t.Errorf("totals\n got %+v\nwant %+v", got.Totals, want.Totals)
			}
			if !reflect.DeepEqual(got.Rows, want.Rows) {
				t.Errorf("%d rows, want %d", len(got.Rows), len(want.Rows))
				for i := range max(len(got.Rows), len(want.Rows)) {
					var g, w string
					if i < len(got.Rows) {
						g = fmt.Sprintf("%+v", got.Rows[i])
					}
					if i < len(want.Rows) {
						w = fmt.Sprintf("%+v", want.Rows[i])
					}
					if g != w && i < 10 {
						t.Errorf("row %d\n got %s\nwant %s", i, g, w)
					}
				}
			}
			if want.Totals.Flows == 0 && tc.cond != "sip = 10.250.250.250" {
				t.Error("the query matches nothing: it tests nothing")
			}
		})
	}
}
