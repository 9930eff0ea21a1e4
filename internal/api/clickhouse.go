package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/clickhouse"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/query"
)

// maxHoldingRows bounds the (node, interface) pairs Holdings reads.
const maxHoldingRows = 10_000

// ClickHouseBackend answers from the flows table of a ClickHouse database
// (issue 24's fleet store) through clickhouse.Run, which answers as the
// embedded store does. It has no live flows.
type ClickHouseBackend struct {
	conn clickhouse.Conn
	f    clickhouse.Features
	db   string
}

// NewClickHouseBackend asks the server behind conn for its version (the
// SQL depends on it) and answers from database db (default "weir").
func NewClickHouseBackend(ctx context.Context, conn clickhouse.Conn, db string) (*ClickHouseBackend, error) {
	if db == "" {
		db = "weir"
	}
	if err := clickhouse.CheckIdent("database", db); err != nil {
		return nil, err
	}
	f, err := clickhouse.Probe(ctx, conn)
	if err != nil {
		return nil, err
	}
	return &ClickHouseBackend{conn: conn, f: f, db: db}, nil
}

// Name is "clickhouse".
func (b *ClickHouseBackend) Name() string { return "clickhouse" }

// Query runs q as SQL on the server.
func (b *ClickHouseBackend) Query(ctx context.Context, q *query.Query, live bool) (*query.Result, error) {
	if live {
		return nil, ErrNoLive
	}
	return clickhouse.Run(ctx, b.conn, b.f, b.db, q)
}

// Live returns ErrNoLive: a fleet store has no live flows.
func (b *ClickHouseBackend) Live(context.Context) ([]flow.Record, error) { return nil, ErrNoLive }

// Holdings lists the nodes and interfaces of the flows table with their
// spans (by the records' start, to the second; bytes on disk are not
// known per interface: 0).
func (b *ClickHouseBackend) Holdings(ctx context.Context) (*Holdings, error) {
	sql := "SELECT node, iface, toString(toUInt32(min(start))) AS first, toString(toUInt32(max(start))) AS last, " +
		"toString(count()) AS flows, toString(uniqExact(toDate(start))) AS days FROM " + b.db + "." + clickhouse.TableFlows +
		" GROUP BY node, iface ORDER BY node, iface LIMIT " + strconv.Itoa(maxHoldingRows) + " FORMAT JSONEachRow"
	rc, err := b.conn.Do(ctx, sql, nil, nil)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	h := &Holdings{Interfaces: []IfaceSpan{}, Nodes: []string{}}
	byIface := map[string]int{}
	sc := bufio.NewScanner(io.LimitReader(rc, 64<<20))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row struct{ Node, Iface, First, Last, Flows, Days string }
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			return nil, fmt.Errorf("clickhouse: reading the interfaces: %w", err)
		}
		first, err1 := strconv.ParseInt(row.First, 10, 64)
		last, err2 := strconv.ParseInt(row.Last, 10, 64)
		flows, err3 := strconv.ParseInt(row.Flows, 10, 64)
		days, err4 := strconv.Atoi(row.Days)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return nil, fmt.Errorf("clickhouse: reading the interfaces: %w", err)
		}
		if !slices.Contains(h.Nodes, row.Node) {
			h.Nodes = append(h.Nodes, row.Node)
		}
		f, l := time.Unix(first, 0).UTC(), time.Unix(last, 0).UTC()
		i, ok := byIface[row.Iface]
		if !ok {
			i = len(h.Interfaces)
			byIface[row.Iface] = i
			h.Interfaces = append(h.Interfaces, IfaceSpan{Iface: row.Iface, First: f, Last: l})
		}
		sp := &h.Interfaces[i]
		if f.Before(sp.First) {
			sp.First = f
		}
		if l.After(sp.Last) {
			sp.Last = l
		}
		sp.Flows += flows
		sp.Days = max(sp.Days, days)
		if h.First == nil || f.Before(*h.First) {
			h.First = &f
		}
		if h.Last == nil || l.After(*h.Last) {
			h.Last = &l
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse: reading the interfaces: %w", err)
	}
	slices.Sort(h.Nodes)
	slices.SortFunc(h.Interfaces, func(a, b IfaceSpan) int { return strings.Compare(a.Iface, b.Iface) })
	return h, nil
}

// Ready asks the server for its version.
func (b *ClickHouseBackend) Ready(ctx context.Context) error {
	_, err := clickhouse.Probe(ctx, b.conn)
	return err
}
