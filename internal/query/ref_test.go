package query

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/store"
)

// The reference below is written from the documented semantics, not from
// the engine: conditions are evaluated on flow.Records with netip, groups
// kept in a map keyed by a string, and ranked with sort.

var (
	t0       = time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC).UnixNano()
	v4Pool   = []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.1.7", "10.1.0.1", "192.168.1.1"}
	v6Pool   = []string{"2001:db8::1", "2001:db8::2", "2001:db8:1::9", "fe80::1"}
	portPool = []uint16{22, 53, 80, 443, 8080, 40000, 40001, 40002, 51515}
	ifPool   = []string{"eth0", "eth1", "wg0"}
	// dropPool are drop reasons; "" is a drop without a known reason.
	dropPool = []string{"NO_SOCKET", "NETFILTER_DROP", "TCP_CSUM", ""}
	// nodePool are nodes: agents' names, a collector's exporter address,
	// and "" (records from before nodes, or a source without one).
	nodePool = []string{"node-a", "node-b", "192.0.2.7", ""}
)

// randRecords makes n records over about two days (so two day partitions),
// with ms-aligned times so that any store time precision keeps them exact.
func randRecords(r *rand.Rand, n int) []flow.Record {
	out := make([]flow.Record, n)
	for i := range out {
		rec := &out[i]
		pool, ver := v4Pool, uint8(4)
		if r.IntN(4) == 0 {
			pool, ver = v6Pool, 6
		}
		rec.Key.SrcAddr = netip.MustParseAddr(pool[r.IntN(len(pool))]).As16()
		rec.Key.DstAddr = netip.MustParseAddr(pool[r.IntN(len(pool))]).As16()
		rec.Key.IPVersion = ver
		rec.Key.Proto = []uint8{6, 6, 17, 1}[r.IntN(4)]
		if rec.Key.Proto != 1 {
			rec.Key.SrcPort, rec.Key.DstPort = portPool[r.IntN(len(portPool))], portPool[r.IntN(len(portPool))]
		}
		rec.Packets = uint64(1 + r.IntN(1000))
		rec.Bytes = rec.Packets * uint64(40+r.IntN(1400))
		rec.RevPackets = uint64(r.IntN(1000))
		rec.RevBytes = rec.RevPackets * uint64(40+r.IntN(1400))
		rec.Start = t0 + int64(r.IntN(40*3600*1000))*int64(time.Millisecond)
		rec.End = rec.Start + int64(r.IntN(60000))*int64(time.Millisecond)
		rec.Iface = ifPool[r.IntN(len(ifPool))]
		if r.IntN(5) == 0 {
			rec.VLAN = 10
		}
		rec.EndReason = flow.ReasonIdle
		rec.Node = nodePool[i/97%len(nodePool)] // in runs, not drawn: the other draws stay as they were
		// Only eth1 (as an eBPF source with drops and sampling) has
		// drops, so that eth0 and wg0 blocks have none.
		if rec.Iface == "eth1" {
			rec.Sampling = []uint32{0, 1, 100}[r.IntN(3)]
			if r.IntN(4) == 0 {
				rec.DropPackets = uint64(r.IntN(20))
				rec.DropBytes = rec.DropPackets * uint64(40+r.IntN(1400))
				rec.DropReason = dropPool[r.IntN(len(dropPool))]
			}
		}
	}
	return out
}

// writeStore writes recs in batches (one block per partition per batch).
func writeStore(t testing.TB, recs []flow.Record, batch int) *store.Store {
	t.Helper()
	s, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true, Writeout: time.Hour, CloseTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for i := 0; i < len(recs); i += batch {
		if err := s.Write(recs[i:min(i+batch, len(recs))]); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// rcond is a reference condition: its text and its meaning.
type rcond struct {
	text string
	eval func(r *flow.Record) bool
}

func addrOfRec(a [16]byte, ver uint8) netip.Addr {
	x := netip.AddrFrom16(a)
	if ver == 4 {
		return x.Unmap()
	}
	return x
}

func randLeaf(r *rand.Rand) rcond {
	pickAddr := func() (string, func(netip.Addr) bool) {
		pool := v4Pool
		if r.IntN(3) == 0 {
			pool = v6Pool
		}
		a := netip.MustParseAddr(pool[r.IntN(len(pool))])
		if r.IntN(8) == 0 { // a v6 prefix covering the IPv4-mapped space must not match IPv4 rows
			p := netip.MustParsePrefix([]string{"::/0", "::ffff:0:0/96", "0.0.0.0/0"}[r.IntN(3)])
			return p.String(), p.Contains
		}
		if r.IntN(3) == 0 {
			p, _ := a.Prefix([]int{8, 16, 24, 64, 112}[r.IntN(5)] % (a.BitLen() + 1))
			return p.String(), p.Contains
		}
		return a.String(), func(x netip.Addr) bool { return x == a }
	}
	ops := []string{"=", "!=", "<", "<=", ">", ">="}
	cmp := func(op string, v, x uint64) bool {
		switch op {
		case "=":
			return v == x
		case "!=":
			return v != x
		case "<":
			return v < x
		case "<=":
			return v <= x
		case ">":
			return v > x
		}
		return v >= x
	}
	switch r.IntN(12) {
	case 0, 1: // one address side
		side := r.IntN(2)
		name := []string{"sip", "dip", "src", "dst", "snet", "dnet"}[side+2*r.IntN(3)]
		v, in := pickAddr()
		neg := r.IntN(3) == 0
		op := map[bool]string{false: "=", true: "!="}[neg]
		if !neg && r.IntN(2) == 0 {
			op = "" // "sip 10.0.0.1"
		}
		return rcond{fmt.Sprintf("%s %s %s", name, op, v), func(rec *flow.Record) bool {
			a := rec.Key.SrcAddr
			if side == 1 {
				a = rec.Key.DstAddr
			}
			return in(addrOfRec(a, rec.Key.IPVersion)) != neg
		}}
	case 2: // either address
		v, in := pickAddr()
		name := []string{"host", "net"}[r.IntN(2)]
		neg := r.IntN(3) == 0
		op := map[bool]string{false: "=", true: "!="}[neg]
		return rcond{fmt.Sprintf("%s %s %s", name, op, v), func(rec *flow.Record) bool {
			any := in(addrOfRec(rec.Key.SrcAddr, rec.Key.IPVersion)) || in(addrOfRec(rec.Key.DstAddr, rec.Key.IPVersion))
			return any != neg
		}}
	case 3, 4: // one port side
		side, op := r.IntN(2), ops[r.IntN(len(ops))]
		p := portPool[r.IntN(len(portPool))]
		v := fmt.Sprint(p)
		if p == 443 && r.IntN(2) == 0 {
			v = "https"
		}
		return rcond{fmt.Sprintf("%s %s %s", []string{"sport", "dport"}[side], op, v), func(rec *flow.Record) bool {
			x := rec.Key.SrcPort
			if side == 1 {
				x = rec.Key.DstPort
			}
			return cmp(op, uint64(x), uint64(p))
		}}
	case 5: // either port: != means neither side, other operators either side
		op := ops[r.IntN(len(ops))]
		p := portPool[r.IntN(len(portPool))]
		return rcond{fmt.Sprintf("port %s %d", op, p), func(rec *flow.Record) bool {
			s, d := cmp(op, uint64(rec.Key.SrcPort), uint64(p)), cmp(op, uint64(rec.Key.DstPort), uint64(p))
			if op == "!=" {
				return s && d
			}
			return s || d
		}}
	case 6:
		op := ops[r.IntN(len(ops))]
		p := []uint8{1, 6, 17, 58}[r.IntN(4)]
		text := fmt.Sprintf("proto %s %d", op, p)
		if op == "=" && r.IntN(2) == 0 {
			text = map[uint8]string{1: "icmp", 6: "tcp", 17: "udp", 58: "icmpv6"}[p]
		}
		return rcond{text, func(rec *flow.Record) bool { return cmp(op, uint64(rec.Key.Proto), uint64(p)) }}
	case 9: // drop reason: = or != only, case-insensitive, "" for none
		v := dropPool[r.IntN(len(dropPool))]
		neg := r.IntN(2) == 0
		text := quote(v)
		if r.IntN(3) == 0 {
			text = quote(strings.ToLower(v))
		}
		return rcond{fmt.Sprintf("drop_reason %s %s", map[bool]string{false: "=", true: "!="}[neg], text), func(rec *flow.Record) bool {
			return (rec.DropReason == v) != neg
		}}
	case 10:
		op := ops[r.IntN(len(ops))]
		v := uint64([]int{0, 1, 100, 5000}[r.IntN(4)])
		return rcond{fmt.Sprintf("sampling %s %d", op, v), func(rec *flow.Record) bool { return cmp(op, uint64(rec.Sampling), v) }}
	case 11: // node: = or != only, exact, "" for none
		v := nodePool[r.IntN(len(nodePool))]
		neg := r.IntN(2) == 0
		return rcond{fmt.Sprintf("node %s %s", map[bool]string{false: "=", true: "!="}[neg], quote(v)), func(rec *flow.Record) bool {
			return (rec.Node == v) != neg
		}}
	case 7:
		name := ifPool[r.IntN(len(ifPool))]
		neg := r.IntN(2) == 0
		return rcond{fmt.Sprintf("iface %s %s", map[bool]string{false: "=", true: "!="}[neg], name), func(rec *flow.Record) bool {
			return (rec.Iface == name) != neg
		}}
	default:
		op := ops[r.IntN(len(ops))]
		v := uint64([]int{0, 10, 11}[r.IntN(3)])
		return rcond{fmt.Sprintf("vlan %s %d", op, v), func(rec *flow.Record) bool { return cmp(op, uint64(rec.VLAN), v) }}
	}
}

// randParsedCond draws query i's condition for the cross-checks: a random
// one of depth 2, or none (every row) one time in three, parsed.
func randParsedCond(t *testing.T, r *rand.Rand, i int) (rcond, *Condition) {
	t.Helper()
	rc := randCond(r, 2)
	if r.IntN(3) == 0 {
		rc = rcond{"", func(*flow.Record) bool { return true }}
	}
	cond, err := ParseCondition(rc.text)
	if err != nil {
		t.Fatalf("query %d: %q: %v", i, rc.text, err)
	}
	return rc, cond
}

func randCond(r *rand.Rand, depth int) rcond {
	if depth == 0 || r.IntN(3) == 0 {
		return randLeaf(r)
	}
	switch r.IntN(3) {
	case 0:
		x := randCond(r, depth-1)
		return rcond{"not (" + x.text + ")", func(rec *flow.Record) bool { return !x.eval(rec) }}
	case 1:
		a, b := randCond(r, depth-1), randCond(r, depth-1)
		return rcond{"(" + a.text + ") and (" + b.text + ")", func(rec *flow.Record) bool { return a.eval(rec) && b.eval(rec) }}
	}
	a, b := randCond(r, depth-1), randCond(r, depth-1)
	return rcond{"(" + a.text + ") || (" + b.text + ")", func(rec *flow.Record) bool { return a.eval(rec) || b.eval(rec) }}
}

// reference answers q over recs the slow, obvious way.
func reference(q *Query, cond func(*flow.Record) bool, recs []flow.Record) ([]Row, Counters) {
	res := int64(q.Resolution)
	if res == 0 {
		res = int64(DefaultResolution)
	}
	from, to := bounds(q)
	groups := map[Key]*Row{} // Key is comparable: every Time in it is UTC
	var tot Counters
	for i := range recs {
		rec := &recs[i]
		if rec.Start < from || rec.Start >= to || (len(q.Ifaces) > 0 && !slices.Contains(q.Ifaces, rec.Iface)) || !cond(rec) {
			continue
		}
		var k Key
		for _, a := range q.Group {
			switch a {
			case AttrTime:
				bin := rec.Start / res * res
				k.Time = time.Unix(0, bin).UTC()
			case AttrNode:
				k.Node = rec.Node
			case AttrIface:
				k.Iface = rec.Iface
			case AttrSrcIP:
				k.SrcIP = addrOfRec(rec.Key.SrcAddr, rec.Key.IPVersion)
			case AttrDstIP:
				k.DstIP = addrOfRec(rec.Key.DstAddr, rec.Key.IPVersion)
			case AttrSrcPort:
				k.SrcPort = rec.Key.SrcPort
			case AttrDstPort:
				k.DstPort = rec.Key.DstPort
			case AttrProto:
				k.Proto = rec.Key.Proto
			case AttrDropReason:
				k.DropReason = rec.DropReason
			case AttrSampling:
				k.Sampling = rec.Sampling
			}
		}
		g := groups[k]
		if g == nil {
			g = &Row{Key: k}
			groups[k] = g
		}
		c := Counters{rec.Packets, rec.Bytes, rec.RevPackets, rec.RevBytes, 1, rec.DropPackets, rec.DropBytes}
		g.add(&c)
		tot.add(&c)
	}
	var rows []Row
	for _, g := range groups {
		rows = append(rows, *g)
	}
	slices.SortFunc(rows, func(a, b Row) int {
		if !a.Time.Equal(b.Time) {
			return a.Time.Compare(b.Time)
		}
		va, vb := a.Value(q.Sort, q.Dir), b.Value(q.Sort, q.Dir)
		switch {
		case va != vb && (va > vb) != q.Ascending:
			return -1
		case va != vb:
			return 1
		}
		return a.Key.compare(&b.Key)
	})
	if q.Limit > 0 {
		var cut []Row
		perBin := map[time.Time]int{}
		for _, r := range rows {
			if perBin[r.Time]++; perBin[r.Time] <= q.Limit {
				cut = append(cut, r)
			}
		}
		rows = cut
	}
	return rows, tot
}

func describe(rows []Row) string {
	var b strings.Builder
	for _, r := range rows[:min(len(rows), 5)] {
		fmt.Fprintf(&b, "\n  %+v", r)
	}
	return b.String()
}

// TestAgainstReference: many random queries (groups, conditions, time
// ranges, interfaces, sorts, limits) over a store of random records give
// exactly the reference's rows, in its order, and its totals.
// randWindow sets, each half the time, q's From and To within the span
// randRecords writes, and a quarter of the time one interface: the window
// the bin, one-bin and topseries cross-checks draw their queries in.
func randWindow(r *rand.Rand, q *Query) {
	if r.IntN(2) == 0 {
		q.From = time.Unix(0, t0+int64(r.IntN(30))*int64(time.Hour))
	}
	if r.IntN(2) == 0 {
		q.To = time.Unix(0, t0+int64(10+r.IntN(40))*int64(time.Hour)+int64(r.IntN(3600000))*int64(time.Millisecond))
	}
	if r.IntN(4) == 0 {
		q.Ifaces = []string{ifPool[r.IntN(len(ifPool))]}
	}
}

func TestAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	recs := randRecords(r, 6000)
	s := writeStore(t, recs, 500)
	attrs := []Attr{AttrTime, AttrNode, AttrIface, AttrSrcIP, AttrDstIP, AttrSrcPort, AttrDstPort, AttrProto, AttrDropReason, AttrSampling}
	skipped := 0
	for i := range 300 {
		rc := randCond(r, 3)
		if r.IntN(10) == 0 {
			rc = rcond{"", func(*flow.Record) bool { return true }}
		}
		cond, err := ParseCondition(rc.text)
		if err != nil {
			t.Fatalf("query %d: %q: %v", i, rc.text, err)
		}
		if again, err := ParseCondition(cond.String()); err != nil || again.String() != cond.String() {
			t.Fatalf("%q: canonical form %q does not parse back to itself: %v", rc.text, cond.String(), err)
		}
		q := &Query{Cond: cond, Limit: r.IntN(4) * 3, Workers: 1 + r.IntN(3), Ascending: r.IntN(5) == 0,
			Sort: Metric(r.IntN(5)), Dir: Direction(r.IntN(3))}
		for _, a := range attrs {
			if r.IntN(3) == 0 {
				q.Group = append(q.Group, a)
			}
		}
		if slices.Contains(q.Group, AttrTime) {
			q.Resolution = []time.Duration{0, time.Hour, 6 * time.Hour}[r.IntN(3)]
		}
		if r.IntN(2) == 0 {
			q.From = time.Unix(0, t0+int64(r.IntN(30))*int64(time.Hour))
		}
		switch r.IntN(3) {
		case 0:
			q.To = time.Unix(0, t0+int64(10+r.IntN(40))*int64(time.Hour)+int64(r.IntN(3600000))*int64(time.Millisecond))
		case 1: // exactly at a record's Start: that record is out
			q.To = time.Unix(0, recs[r.IntN(len(recs))].Start)
		}
		if r.IntN(4) == 0 {
			q.Ifaces = []string{ifPool[r.IntN(len(ifPool))]}
		}
		got, err := Run(context.Background(), s, q, nil)
		if err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
		skipped += got.Stats.BlocksSkipped
		wantRows, wantTot := reference(q, rc.eval, recs)
		if got.Totals != wantTot {
			t.Fatalf("query %d %q group %v: totals %+v, want %+v", i, rc.text, q.Group, got.Totals, wantTot)
		}
		if !slices.Equal(got.Rows, wantRows) {
			t.Fatalf("query %d %q group %v sort %v/%v asc %v limit %d: %d rows, want %d\ngot:%s\nwant:%s",
				i, rc.text, q.Group, q.Sort, q.Dir, q.Ascending, q.Limit, len(got.Rows), len(wantRows), describe(got.Rows), describe(wantRows))
		}
	}
	if skipped == 0 {
		t.Error("no query skipped a block by its summaries")
	}
}
