package query

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// TestByDictFamilies: byDict sums per dictionary entry without a branch
// per row and splits afterwards the entries whose rows are of more than
// one IP version. Blocks where a few addresses come as IPv4 and as IPv6
// (the same 16 bytes, ::ffff:a.b.c.d), or with version 0 (a damaged
// record's, shown as the 16 bytes: one row with the IPv6 form), with and
// without drops, and blocks
// of one family per address,
// give per source (destination) address exactly the sums of the general
// path grouped by the address and the protocol, added over protocols,
// with and without conditions; the totals are the reference's.
func TestByDictFamilies(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	recs := randRecords(r, 4000)
	shared := []string{"10.0.0.1", "10.0.0.2", "10.1.2.3"}
	for i := range recs {
		if i/500%4 == 3 {
			continue // a run of blocks as randRecords made them (one family per address)
		}
		if r.IntN(3) == 0 {
			a := netip.MustParseAddr(shared[r.IntN(len(shared))]).As16()
			recs[i].Key.SrcAddr, recs[i].Key.DstAddr = a, a
			recs[i].Key.IPVersion = []uint8{4, 4, 6, 0}[r.IntN(4)]
		}
	}
	byStart(recs)
	s := writeStore(t, recs, 100)
	conds := []rcond{{"", func(*flow.Record) bool { return true }},
		{"port = 443", func(rec *flow.Record) bool { return rec.Key.SrcPort == 443 || rec.Key.DstPort == 443 }},
		{"iface = eth1", func(rec *flow.Record) bool { return rec.Iface == "eth1" }}}
	mixed := 0
	for _, rc := range conds {
		for _, a := range []Attr{AttrSrcIP, AttrDstIP} {
			cond, err := ParseCondition(rc.text)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Run(context.Background(), s, &Query{Group: []Attr{a}, Cond: cond}, nil)
			if err != nil {
				t.Fatal(err)
			}
			gen, err := Run(context.Background(), s, &Query{Group: []Attr{a, AttrProto}, Cond: cond}, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := map[Key]Counters{}
			for _, row := range gen.Rows {
				k := row.Key
				k.Proto = 0
				c := want[k]
				c.add(&row.Counters)
				want[k] = c
			}
			if len(got.Rows) != len(want) {
				t.Fatalf("%q by %v: %d rows, want %d", rc.text, a, len(got.Rows), len(want))
			}
			shown := map[netip.Addr]bool{} // no address printed on two rows
			for _, row := range got.Rows {
				ip := row.SrcIP
				if a == AttrDstIP {
					ip = row.DstIP
				}
				if shown[ip] {
					t.Fatalf("%q by %v: %v on two rows", rc.text, a, ip)
				}
				shown[ip] = true
				if c, ok := want[row.Key]; !ok || c != row.Counters {
					t.Fatalf("%q by %v: %+v: %+v, want %+v (%v)", rc.text, a, row.Key, row.Counters, c, ok)
				}
				if a != AttrDstIP && ip.Is4In6() {
					mixed++
				}
			}
			if _, tot := reference(&Query{Group: []Attr{a}}, rc.eval, recs); got.Totals != tot {
				t.Fatalf("%q by %v: totals %+v, want %+v", rc.text, a, got.Totals, tot)
			}
		}
	}
	if mixed == 0 {
		t.Fatal("no IPv4-mapped IPv6 source in the answers: the data does not mix families")
	}
}
