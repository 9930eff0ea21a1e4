package query

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// TestAddrSetAgainstReference: ors of two to twelve equality tests of one
// address column (whole addresses of both families, an IPv4-mapped IPv6
// address beside the same IPv4 bytes, prefixes), alone or inside an and
// or a not, take the set path (fuse) and give exactly the reference's
// rows and totals, on stored blocks (by dictionary entry) and on live
// records (row by row); the condition prints as written.
func TestAddrSetAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	recs := randRecords(r, 3000)
	mapped := netip.MustParseAddr("::ffff:10.0.0.1").As16()
	for i := range recs {
		if i%9 == 0 {
			recs[i].Key.DstAddr, recs[i].Key.IPVersion = mapped, 6 // 10.0.0.1's 16 bytes, as IPv6
		}
	}
	byStart(recs)
	stored, live := recs[:2500], recs[2500:]
	s := writeStore(t, stored, 100)
	values := append(append(slices.Clone(v4Pool), v6Pool...), "::ffff:10.0.0.1", "10.0.0.0/24", "2001:db8::/32", "10.9.9.9")
	for i := range 150 {
		side := r.IntN(2)
		name := []string{"sip", "dip"}[side]
		var texts []string
		var prefixes []netip.Prefix
		for range 2 + r.IntN(11) {
			v := values[r.IntN(len(values))]
			texts = append(texts, name+" = "+v)
			p, err := netip.ParsePrefix(v)
			if err != nil {
				a := netip.MustParseAddr(v)
				p = netip.PrefixFrom(a, a.BitLen())
			}
			prefixes = append(prefixes, p)
		}
		in := func(rec *flow.Record) bool {
			a := rec.Key.SrcAddr
			if side == 1 {
				a = rec.Key.DstAddr
			}
			x := addrOfRec(a, rec.Key.IPVersion)
			return slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(x) })
		}
		text, eval := strings.Join(texts, " or "), in
		switch r.IntN(4) {
		case 0:
			text, eval = "not ("+text+")", func(rec *flow.Record) bool { return !in(rec) }
		case 1:
			text, eval = "proto = tcp and ("+text+")", func(rec *flow.Record) bool { return rec.Key.Proto == 6 && in(rec) }
		}
		cond, err := ParseCondition(text)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if text == strings.Join(texts, " or ") {
			if o, ok := cond.root.(*orNode); !ok || o.set == nil {
				t.Fatalf("%q: not fused into a set test", text)
			}
			if cond.String() != text {
				t.Fatalf("%q prints as %q", text, cond.String())
			}
		}
		q := &Query{Group: [][]Attr{{AttrSrcIP}, {AttrTime, AttrDstIP}, nil, {AttrProto}}[r.IntN(4)], Cond: cond,
			Limit: r.IntN(3) * 3, Workers: 1 + r.IntN(2), Sort: Metric(r.IntN(5)), Dir: Direction(r.IntN(3))}
		got, err := Run(context.Background(), s, q, live)
		if err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
		wantRows, wantTot := reference(q, eval, recs)
		if got.Totals != wantTot || !slices.Equal(got.Rows, wantRows) {
			t.Fatalf("query %d %q group %v: totals %+v, want %+v\ngot:%s\nwant:%s", i, text, q.Group, got.Totals, wantTot,
				describe(got.Rows), describe(wantRows))
		}
	}
}

// TestFuseKeepsMixedOrs: an or that mixes columns or operators keeps its
// leaves' own tests.
func TestFuseKeepsMixedOrs(t *testing.T) {
	for _, text := range []string{"sip = 10.0.0.1 or dip = 10.0.0.2", "sip = 10.0.0.1 or sip != 10.0.0.2", "sip = 10.0.0.1 or dport = 22",
		"host = 10.0.0.1 or host = 10.0.0.2"} {
		cond, err := ParseCondition(text)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := cond.root.(*orNode); !ok || o.set != nil {
			t.Errorf("%q: %s", text, fmt.Sprintf("%T fused", cond.root))
		}
	}
}
