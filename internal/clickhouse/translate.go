package clickhouse

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/query"
)

// plan is a query as SQL: the table it reads and how to read its rows back.
type plan struct {
	stmt   *Stmt
	table  string
	rollup *Rollup
	group  []query.Attr
}

// ErrUnsupported is a query ClickHouse cannot answer as the store would.
var ErrUnsupported = fmt.Errorf("clickhouse: query not supported")

// translate turns q into one SELECT on database db: grouped by q's
// attributes, filtered by its condition, time range and interfaces, from
// the coarsest table (a rollup, else flows) that answers it exactly.
func translate(q *query.Query, db string, f Features) (*plan, error) {
	if err := CheckIdent("database", db); err != nil {
		return nil, err
	}
	p := &plan{group: q.Group, table: TableFlows}
	if r := chooseRollup(q); r != nil {
		p.rollup, p.table = r, r.Table
	}
	s := NewStmt(f.Params).S("SELECT ")
	tns := "start_ns" // a row's start in Unix ns
	if p.rollup != nil {
		tns = "(toInt64(toUInt32(bin)) * 1000000000)"
	}
	var keys []string
	res := resolution(q)
	natDone := false
	for _, a := range q.Group {
		switch a {
		case query.AttrTime:
			keys = append(keys, fmt.Sprintf("toInt64(intDiv(%s, %d) * %d)", tns, res, res))
		case query.AttrSrcIP:
			keys = append(keys, "ip_version", "src_addr")
		case query.AttrDstIP:
			keys = append(keys, "ip_version", "dst_addr")
		case query.AttrNATSrcIP, query.AttrNATDstIP, query.AttrNATSrcPort, query.AttrNATDstPort:
			if !natDone {
				keys, natDone = append(keys, "nat_ip_version"), true
			}
			keys = append(keys, groupCol[a])
		default:
			keys = append(keys, groupCol[a])
		}
	}
	for _, k := range keys {
		s.S(k, ", ")
	}
	flows := "count()"
	if p.rollup != nil {
		flows = "sum(flows)"
	}
	s.S("sum(packets), sum(bytes), sum(rev_packets), sum(rev_bytes), ", flows, ", sum(drop_packets), sum(drop_bytes) FROM ", db, ".", p.table)
	s.S(" WHERE 1")
	from, to := bounds(q)
	if p.rollup != nil {
		if from > 0 {
			s.S(" AND bin >= toDateTime(").Int(from / 1e9).S(")")
		}
		if to < math.MaxInt64 {
			s.S(" AND bin < toDateTime(").Int(to / 1e9).S(")")
		}
	} else {
		if from > 0 {
			s.S(" AND start_ns >= ").Int(from).S(" AND start >= toDateTime(").Int(from / 1e9).S(")") // the second for partition and index pruning
		}
		if to < math.MaxInt64 {
			s.S(" AND start_ns < ").Int(to).S(" AND start <= toDateTime(").Int(to / 1e9).S(")")
		}
	}
	if len(q.Ifaces) > 0 {
		s.S(" AND iface IN (")
		for i, name := range q.Ifaces {
			if i > 0 {
				s.S(", ")
			}
			s.Str(name)
		}
		s.S(")")
	}
	if t := q.Cond.Tree(); t != nil {
		s.S(" AND ")
		if err := cond(s, t); err != nil {
			return nil, err
		}
	}
	if len(keys) > 0 {
		s.S(" GROUP BY ")
		for i, k := range keys {
			if i > 0 {
				s.S(", ")
			}
			s.S(k)
		}
	}
	s.S(" FORMAT RowBinary")
	p.stmt = s
	return p, nil
}

// groupCol is the column of each group attribute read as is.
var groupCol = map[query.Attr]string{
	query.AttrNode: "node", query.AttrIface: "iface", query.AttrSrcPort: "src_port", query.AttrDstPort: "dst_port", query.AttrProto: "proto",
	query.AttrDropReason: "drop_reason", query.AttrSampling: "sampling",
	query.AttrNATSrcIP: "nat_src_addr", query.AttrNATDstIP: "nat_dst_addr", query.AttrNATSrcPort: "nat_src_port", query.AttrNATDstPort: "nat_dst_port",
	query.AttrVerdict: "verdict", query.AttrRule: "rule", query.AttrMark: "ct_mark", query.AttrZone: "ct_zone",
	query.AttrSrcWorkload: "src_workload", query.AttrSrcNamespace: "src_namespace", query.AttrSrcNode: "src_node",
	query.AttrDstWorkload: "dst_workload", query.AttrDstNamespace: "dst_namespace", query.AttrDstNode: "dst_node",
	query.AttrService: "service", query.AttrServiceBackends: "service_backends", query.AttrServiceGroup: "service_group",
	query.AttrServiceMatch: "service_match",
}

// resolution is q's time bin in ns.
func resolution(q *query.Query) int64 {
	if q.Resolution > 0 {
		return int64(q.Resolution)
	}
	return int64(query.DefaultResolution)
}

// bounds are q's [from, to) in Unix ns, as query.Run takes them.
func bounds(q *query.Query) (from, to int64) {
	from, to = 0, math.MaxInt64
	if !q.From.IsZero() {
		from = q.From.UnixNano()
	}
	if !q.To.IsZero() {
		to = q.To.UnixNano()
	}
	return from, to
}

// rollupGroup are the group attributes a rollup keeps, and rollupCond the
// condition attributes it can test.
var (
	rollupGroup = []query.Attr{query.AttrTime, query.AttrNode, query.AttrIface, query.AttrSrcIP, query.AttrDstIP, query.AttrDstPort, query.AttrProto}
	rollupCond  = []string{"sip", "dip", "host", "dport", "proto", "iface", "node"}
)

// chooseRollup returns the coarsest rollup that answers q exactly, or
// nil: q groups and filters only by what the rollup keeps, and its time
// range and bins fall on the rollup's bin boundaries (a record is in a bin
// by its start, so whole bins hold exactly the records of the range).
func chooseRollup(q *query.Query) *Rollup {
	for _, a := range q.Group {
		if !slices.Contains(rollupGroup, a) {
			return nil
		}
	}
	if !leavesIn(q.Cond.Tree(), rollupCond) {
		return nil
	}
	from, to := bounds(q)
	for i := range Rollups {
		r := &Rollups[i]
		w := int64(r.Bin)
		if slices.Contains(q.Group, query.AttrTime) && resolution(q)%w != 0 {
			continue
		}
		if from%w != 0 || (to != math.MaxInt64 && to%w != 0) || from < 0 {
			continue
		}
		return r
	}
	return nil
}

func leavesIn(n *query.CondNode, attrs []string) bool {
	if n == nil {
		return true
	}
	if n.Leaf != nil {
		return slices.Contains(attrs, n.Leaf.Attr)
	}
	return leavesIn(n.L, attrs) && leavesIn(n.R, attrs)
}

// cond appends n as a SQL boolean expression with the store's semantics
// (query's package doc).
func cond(s *Stmt, n *query.CondNode) error {
	if n.Leaf == nil {
		op := " AND "
		if n.Kind == query.CondOr {
			op = " OR "
		}
		s.S("(")
		if err := cond(s, n.L); err != nil {
			return err
		}
		s.S(op)
		if err := cond(s, n.R); err != nil {
			return err
		}
		s.S(")")
		return nil
	}
	l := n.Leaf
	eq := l.Op == "="
	switch l.Attr {
	case "sip", "dip", "host":
		sides := map[string][]string{"sip": {"src_addr"}, "dip": {"dst_addr"}, "host": {"src_addr", "dst_addr"}}[l.Attr]
		s.S("(")
		for i, col := range sides {
			if i > 0 {
				s.S(map[bool]string{true: " AND ", false: " OR "}[l.All])
			}
			if !eq {
				s.S("NOT ")
			}
			addrMatch(s, l, "ip_version", col)
		}
		s.S(")")
	case "port":
		s.S("(src_port ", l.Op, " ").Uint(l.Num).S(map[bool]string{true: " AND ", false: " OR "}[l.All]).S("dst_port ", l.Op, " ").Uint(l.Num).S(")")
	case "sport", "dport", "proto", "vlan", "sampling", "verdict", "ct_mark", "ct_zone", "service_match":
		col := map[string]string{"sport": "src_port", "dport": "dst_port"}[l.Attr]
		if col == "" {
			col = l.Attr
		}
		s.S("(", col, " ", l.Op, " ").Uint(l.Num).S(")")
	case "node", "iface", "rule", "src_workload", "src_namespace", "src_node", "dst_workload", "dst_namespace", "dst_node",
		"service", "service_backends", "service_group":
		s.S("(", l.Attr, " ", l.Op, " ").Str(l.Str).S(")")
	case "drop_reason": // compared ignoring ASCII case: upper() changes ASCII letters only
		s.S("(upper(drop_reason) ", l.Op, " ").Str(l.Str).S(")")
	case "nat_src_ip", "nat_dst_ip", "nat_src_port", "nat_dst_port":
		if l.None {
			s.S("(nat_ip_version ", map[bool]string{true: "=", false: "!="}[eq], " 0)")
			return nil
		}
		if l.Absent {
			s.S("(nat_ip_version = 0 OR ")
		} else {
			s.S("(nat_ip_version != 0 AND ")
		}
		switch l.Attr {
		case "nat_src_ip", "nat_dst_ip":
			if !eq {
				s.S("NOT ")
			}
			addrMatch(s, l, "nat_ip_version", map[string]string{"nat_src_ip": "nat_src_addr", "nat_dst_ip": "nat_dst_addr"}[l.Attr])
		default:
			s.S(map[string]string{"nat_src_port": "nat_src_port", "nat_dst_port": "nat_dst_port"}[l.Attr], " ", l.Op, " ").Uint(l.Num)
		}
		s.S(")")
	default:
		return fmt.Errorf("%w: condition on %s", ErrUnsupported, l.Attr)
	}
	return nil
}

// addrMatch appends whether column col (16 bytes) with IP version column
// ver lies in the leaf's prefix: the family must match (an IPv4 prefix
// never matches an IPv6 row), then the bytes fall within the prefix's
// first and last address (FixedString compares as bytes).
func addrMatch(s *Stmt, l *query.CondLeaf, ver, col string) {
	lo, hi := l.Addr, l.Addr
	for i := int(l.Bits); i < 128; i++ {
		lo[i/8] &^= 0x80 >> (i % 8)
		hi[i/8] |= 0x80 >> (i % 8)
	}
	fam := " = 4"
	if !l.V4 {
		fam = " != 4"
	}
	s.S("(", ver, fam, " AND ", col, " >= ").Bytes(lo[:]).S(" AND ", col, " <= ").Bytes(hi[:]).S(")")
}

// Run answers q from database db through c, as query.Run answers it from
// the embedded store: the same rows, ranked and cut alike, and the same
// totals. Groups stream back and are cut to the top Limit per time bin as
// they come, so memory is bounded by the result, not the groups.
func Run(ctx context.Context, c Conn, f Features, db string, q *query.Query) (*query.Result, error) {
	start := time.Now()
	p, err := translate(q, db, f)
	if err != nil {
		return nil, err
	}
	rc, err := c.Do(ctx, p.stmt.SQL(), p.stmt.Params(), nil)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	res := &query.Result{Query: q}
	r := newReader(rc)
	var rows []query.Row
	prune := max(4096, 4*q.Limit)
	for r.more() {
		row := p.read(r)
		if r.err != nil {
			break
		}
		if row.Flows == 0 { // no GROUP BY over no rows: one row of zeros, not a group
			continue
		}
		res.Stats.Groups++
		addCounters(&res.Totals, &row.Counters)
		rows = append(rows, row)
		if q.Limit > 0 && len(rows) >= prune {
			rows = query.Rank(q, rows) // the top Limit per bin of a part are among the top of the whole
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("clickhouse: reading the result: %w", r.err)
	}
	res.Rows = query.Rank(q, rows)
	if res.Rows == nil {
		res.Rows = []query.Row{} // as the store answers: no rows, not none
	}
	res.Stats.RowsMatched = int64(res.Totals.Flows)
	res.Stats.Elapsed = time.Since(start)
	return res, nil
}

// Table says which table a query was planned on (for tests and --stats).
func (p *plan) Table() string { return p.table }

// read reads one result row: the group values in select order, then the
// sums.
func (p *plan) read(r *reader) query.Row {
	var row query.Row
	k := &row.Key
	natRead := false
	var natVer uint8
	for _, a := range p.group {
		switch a {
		case query.AttrTime:
			if t := int64(r.u64()); t != 0 {
				k.Time = time.Unix(0, t).UTC()
			}
		case query.AttrNode:
			k.Node = r.str()
		case query.AttrIface:
			k.Iface = r.str()
		case query.AttrSrcIP:
			v := r.u8()
			a := r.addr()
			k.SrcIP = addrOf(a, v)
		case query.AttrDstIP:
			v := r.u8()
			a := r.addr()
			k.DstIP = addrOf(a, v)
		case query.AttrSrcPort:
			k.SrcPort = r.u16()
		case query.AttrDstPort:
			k.DstPort = r.u16()
		case query.AttrProto:
			k.Proto = r.u8()
		case query.AttrDropReason:
			k.DropReason = r.str()
		case query.AttrSampling:
			k.Sampling = r.u32()
		case query.AttrNATSrcIP, query.AttrNATDstIP, query.AttrNATSrcPort, query.AttrNATDstPort:
			if !natRead {
				natVer, natRead = r.u8(), true
				k.NATed = natVer != 0
			}
			switch a {
			case query.AttrNATSrcIP:
				if a := r.addr(); natVer != 0 {
					k.NATSrcIP = addrOf(a, natVer)
				}
			case query.AttrNATDstIP:
				if a := r.addr(); natVer != 0 {
					k.NATDstIP = addrOf(a, natVer)
				}
			case query.AttrNATSrcPort:
				k.NATSrcPort = r.u16()
			default:
				k.NATDstPort = r.u16()
			}
		case query.AttrVerdict:
			k.Verdict = flow.Verdict(r.u8())
		case query.AttrRule:
			k.Rule = r.str()
		case query.AttrMark:
			k.Mark = r.u32()
		case query.AttrZone:
			k.Zone = r.u16()
		case query.AttrSrcWorkload:
			k.SrcWorkload = r.str()
		case query.AttrSrcNamespace:
			k.SrcNamespace = r.str()
		case query.AttrSrcNode:
			k.SrcNode = r.str()
		case query.AttrDstWorkload:
			k.DstWorkload = r.str()
		case query.AttrDstNamespace:
			k.DstNamespace = r.str()
		case query.AttrDstNode:
			k.DstNode = r.str()
		case query.AttrService:
			k.Service = r.str()
		case query.AttrServiceBackends:
			k.ServiceBackends = r.str()
		case query.AttrServiceGroup:
			k.ServiceGroup = r.str()
		case query.AttrServiceMatch:
			k.ServiceMatch = flow.ServiceMatch(r.u8())
		}
	}
	c := &row.Counters
	c.Packets, c.Bytes, c.RevPackets, c.RevBytes, c.Flows, c.DropPackets, c.DropBytes = r.u64(), r.u64(), r.u64(), r.u64(), r.u64(), r.u64(), r.u64()
	return row
}

// addrOf is a stored address as the store's queries give it: unmapped for
// IPv4.
func addrOf(a [16]byte, ver uint8) netip.Addr {
	if ver == 4 {
		return netip.AddrFrom16(a).Unmap()
	}
	return netip.AddrFrom16(a)
}

func addCounters(t, c *query.Counters) {
	t.Packets += c.Packets
	t.Bytes += c.Bytes
	t.RevPackets += c.RevPackets
	t.RevBytes += c.RevBytes
	t.Flows += c.Flows
	t.DropPackets += c.DropPackets
	t.DropBytes += c.DropBytes
}
