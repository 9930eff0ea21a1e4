package ipfixrecv

import (
	"fmt"
	"slices"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/ipfix"
	ipfixsink "github.com/weir-dev/weir/internal/sink/ipfix"
)

// enrich gives randRecords' records workloads, services, rules, marks and
// zones (some none, some all, some a few), from a few shared values as
// the enricher gives them.
func enrich(recs []flow.Record) {
	ws := []*flow.Workload{{Name: "web-1", Namespace: "shop", Node: "n1"}, {Name: "db-0", Namespace: "shop"}, {Name: "host-ä"}}
	ss := []*flow.Service{{Name: "shop/web", Backends: "10.0.0.5:8080,10.0.0.6:8080", Group: "g1"}, {Name: "shop/db"}}
	for i := range recs {
		r := &recs[i]
		switch i % 5 {
		case 1:
			r.SrcWorkload = ws[i%3]
		case 2:
			r.SrcWorkload, r.DstWorkload, r.Service, r.ServiceMatch = ws[i%3], ws[(i+1)%3], ss[i%2], flow.ServiceMatchVIP
		case 3:
			r.Rule, r.Mark, r.Zone = fmt.Sprint("rule-", i%4), uint32(i)<<8, uint16(i%7)
		case 4:
			r.DstWorkload, r.Service, r.ServiceMatch, r.Mark = ws[0], ss[1], flow.ServiceMatchNAT, 1
		}
	}
}

// sameEnriched compares records, workloads and services by value.
func sameEnriched(a, b flow.Record) bool {
	eqW := func(x, y *flow.Workload) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	if !eqW(a.SrcWorkload, b.SrcWorkload) || !eqW(a.DstWorkload, b.DstWorkload) ||
		(a.Service == nil) != (b.Service == nil) || (a.Service != nil && *a.Service != *b.Service) {
		return false
	}
	a.SrcWorkload, a.DstWorkload, a.Service = nil, nil, nil
	b.SrcWorkload, b.DstWorkload, b.Service = nil, nil, nil
	return a == b
}

// TestRoundTripEnterprise: weir's exporter with a PEN → weir's collector
// with the same PEN, over UDP and TCP, gives every record back with its
// workloads, service, rule, mark and zone, the workloads interned (one
// pointer per distinct workload); a collector without the PEN gives the
// records back without them, and counts no error.
func TestRoundTripEnterprise(t *testing.T) {
	for i, c := range []struct {
		scheme string
		pen    uint32
	}{{"udp", ipfix.DocumentationPEN}, {"tcp", ipfix.DocumentationPEN}, {"udp", 0}} {
		t.Run(fmt.Sprint(c.scheme, "/pen=", c.pen), func(t *testing.T) {
			col, m, stop := run(t, Config{Listen: []string{c.scheme + "://127.0.0.1:0"}, Sockets: 2,
				Decoder: ipfix.DecoderConfig{PEN: c.pen}})
			defer stop()
			want := randRecords(2000, uint64(10+i))
			enrich(want)
			x, err := ipfixsink.New(ipfixsink.Config{URL: "ipfix+" + c.scheme + "://" + col.Addrs()[0].String(), Domain: 7, PEN: ipfix.DocumentationPEN})
			if err != nil {
				t.Fatal(err)
			}
			for j := 0; j < len(want); j += 100 {
				if err := x.Write(want[j : j+100]); err != nil {
					t.Fatal(err)
				}
			}
			x.Close()
			if st := x.Stats(); st.DroppedRecords != 0 || st.CutStrings != 0 {
				t.Fatalf("exporter: %+v", st)
			}
			waitRecords(t, m, len(want))
			stop()
			got := slices.Clone(m.recs)
			sortRecs(got)
			sortRecs(want)
			if len(got) != len(want) {
				t.Fatalf("%d records, want %d", len(got), len(want))
			}
			workloads := map[flow.Workload]*flow.Workload{}
			for j := range want {
				w := want[j]
				w.Node = "127.0.0.1" // the exporter named no node: its address
				if c.pen == 0 {
					w.SrcWorkload, w.DstWorkload, w.Service, w.ServiceMatch, w.Rule, w.Mark, w.Zone = nil, nil, nil, 0, "", 0, 0
				}
				if !sameEnriched(got[j], w) {
					t.Fatalf("record %d:\n got %+v\nwant %+v", j, got[j], w)
				}
				for _, p := range []*flow.Workload{got[j].SrcWorkload, got[j].DstWorkload} {
					if p == nil {
						continue
					}
					if q, ok := workloads[*p]; ok && q != p {
						t.Fatalf("record %d: workload %+v not interned", j, *p)
					}
					workloads[*p] = p
				}
			}
			if c.pen != 0 && len(workloads) != 3 {
				t.Errorf("%d distinct workloads", len(workloads))
			}
			st := col.Stats()
			if st.Records != uint64(len(want)) || st.SequenceGaps != 0 || st.Errors != [ipfix.NumDecodeErrors]uint64{} {
				t.Errorf("stats %+v", st)
			}
		})
	}
}
