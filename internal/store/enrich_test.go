package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// flatRec is a record with its enrichment pointers replaced by the values
// they point to, so records compare by content.
type flatRec struct {
	flow.Record
	Src, Dst       flow.Workload
	Svc            flow.Service
	HasSrc, HasDst bool
	HasSvc         bool
}

func flat(r flow.Record) flatRec {
	f := flatRec{Record: r}
	if r.SrcWorkload != nil {
		f.Src, f.HasSrc = *r.SrcWorkload, true
	}
	if r.DstWorkload != nil {
		f.Dst, f.HasDst = *r.DstWorkload, true
	}
	if r.Service != nil {
		f.Svc, f.HasSvc = *r.Service, true
	}
	f.SrcWorkload, f.DstWorkload, f.Service = nil, nil, nil
	return f
}

// recEq reports whether a and b hold the same values, pointers compared
// by what they point to.
func recEq(a, b flow.Record) bool { return flat(a) == flat(b) }

// Workloads and services as an inventory would hand them out: shared,
// immutable entries.
var (
	testWorkloads = []*flow.Workload{
		{Name: "web-1", Namespace: "shop", Node: "node-a"},
		{Name: "web-2", Namespace: "shop", Node: "node-b"},
		{Name: "cart-0", Namespace: "shop", Node: "node-a"},
		{Name: "db.example.internal"}, // a VM: no namespace or node
		{Name: "ünïcode-pod", Namespace: "ns-" + strings.Repeat("x", 200), Node: "node-c"},
	}
	testServices = []*flow.Service{
		{Name: "shop/cart", Backends: "10.244.1.5:8080,10.244.2.6:8080", Group: "lb-a"},
		{Name: "shop/web", Backends: strings.Repeat("10.244.9.9:80,", 40) + "10.244.9.10:80"},
		{Name: "a/x,b/y"},
	}
)

// withEnrich gives records workloads at both ends and, every other one, a
// service with a match; every every-th record is left unknown.
func withEnrich(recs []flow.Record, every int) []flow.Record {
	for i := range recs {
		if every > 0 && i%every == 0 {
			continue
		}
		r := &recs[i]
		r.SrcWorkload = testWorkloads[i%len(testWorkloads)]
		if i%3 != 0 {
			r.DstWorkload = testWorkloads[(i/3)%len(testWorkloads)]
		}
		if i%2 == 0 {
			r.Service = testServices[(i/2)%len(testServices)]
			r.ServiceMatch = flow.ServiceMatch(1 + (i/2)%4)
		}
	}
	return recs
}

// v5Cols are the column ids new in version 5.
var v5Cols = []int{cSrcWlName, cSrcWlNamespace, cSrcWlNode, cDstWlName, cDstWlNamespace, cDstWlNode,
	cSvcName, cSvcBackends, cSvcGroup, cServiceMatch}

// TestEnrichRoundTrip: blocks with workloads and services decode to the
// values written; rows of a block with the same workload share one
// pointer, nil stays nil; a block without enrichment leaves the columns
// out; each field alone stores only its column.
func TestEnrichRoundTrip(t *testing.T) {
	e := newTestEncoder(t)
	t.Run("none", func(t *testing.T) {
		h := roundTrip(t, e, newGen(5).window(nil, 2000, t0, "x"))
		for _, id := range v5Cols {
			if h.omit&(1<<uint(id)) == 0 {
				t.Errorf("col %d stored, want it left out", id)
			}
		}
	})
	t.Run("all", func(t *testing.T) {
		recs := withEnrich(withNAT(newGen(6).window(nil, 3000, t0, ""), 4), 7)
		b, h := e.encode(nil, recs)
		if h.omit>>cSrcWlName&^(1<<(cNode-cSrcWlName)) != 0 {
			t.Errorf("omitted %#x with every enrichment column in use", h.omit)
		}
		for _, id := range v5Cols[:9] {
			if h.cols[id].enc != encSDictL {
				t.Errorf("col %d: enc %d, want sdictl", id, h.cols[id].enc)
			}
		}
		if c := h.cols[cServiceMatch]; c.min != 0 || c.max != uint64(flow.ServiceMatchAmbiguous) {
			t.Errorf("service match range %d..%d", c.min, c.max)
		}
		if c := h.cols[cSvcBackends]; c.max != uint64(len(testServices[1].Backends)) {
			t.Errorf("backends lengths %d..%d", c.min, c.max)
		}
		var c Columns
		if err := decodeBlock(b, true, &c); err != nil {
			t.Fatal(err)
		}
		ptrs := map[flow.Workload]*flow.Workload{}
		svcs := map[flow.Service]*flow.Service{}
		for i := range recs {
			if got := rowOf(&c, i); !recEq(got, recs[i]) {
				t.Fatalf("row %d:\n got %+v\nwant %+v", i, flat(got), flat(recs[i]))
			}
			for _, w := range []*flow.Workload{c.SrcWorkload[i], c.DstWorkload[i]} {
				if w == nil {
					continue
				}
				if p, ok := ptrs[*w]; ok && p != w {
					t.Fatalf("row %d: workload %+v not shared", i, *w)
				}
				ptrs[*w] = w
			}
			if s := c.Service[i]; s != nil {
				if p, ok := svcs[*s]; ok && p != s {
					t.Fatalf("row %d: service %+v not shared", i, *s)
				}
				svcs[*s] = s
			}
		}
		if len(ptrs) != len(testWorkloads) || len(svcs) != len(testServices) {
			t.Errorf("%d workloads, %d services built", len(ptrs), len(svcs))
		}
	})
	for _, c := range []struct {
		name string
		set  func(r *flow.Record, i int)
		ids  []int
	}{
		{"src name", func(r *flow.Record, i int) { r.SrcWorkload = &flow.Workload{Name: "a"} }, []int{cSrcWlName}},
		{"dst node", func(r *flow.Record, i int) { r.DstWorkload = &flow.Workload{Node: "n"} }, []int{cDstWlNode}},
		{"group", func(r *flow.Record, i int) { r.Service = &flow.Service{Group: "g"} }, []int{cSvcGroup}},
		{"match", func(r *flow.Record, i int) { r.ServiceMatch = flow.ServiceMatchVIP }, []int{cServiceMatch}},
		{"empty", func(r *flow.Record, i int) { r.SrcWorkload = &flow.Workload{} }, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			recs := baseRecs(200)
			for i := range recs {
				if i%2 == 1 {
					c.set(&recs[i], i)
				}
			}
			b, h := e.encode(nil, recs)
			for _, id := range v5Cols {
				want := true
				for _, s := range c.ids {
					want = want && s != id
				}
				if got := h.omit&(1<<uint(id)) != 0; got != want {
					t.Errorf("col %d omitted %v, want %v", id, got, want)
				}
			}
			var cols Columns
			if err := decodeBlock(b, true, &cols); err != nil {
				t.Fatal(err)
			}
			for i := range recs {
				want := recs[i]
				if w := want.SrcWorkload; w != nil && *w == (flow.Workload{}) {
					want.SrcWorkload = nil // an all-empty workload reads back as unknown
				}
				if got := rowOf(&cols, i); !recEq(got, want) {
					t.Fatalf("row %d:\n got %+v\nwant %+v", i, flat(got), flat(want))
				}
			}
		})
	}
}

// TestEnrichLongStrings: enrichment strings are kept up to maxLongStr
// bytes (far past the 64 of drop reasons and rules) and cut at a rune
// start beyond it, counted.
func TestEnrichLongStrings(t *testing.T) {
	e := newTestEncoder(t)
	long := strings.Repeat("é", maxLongStr) // 2×maxLongStr bytes
	recs := baseRecs(10)
	recs[3].Service = &flow.Service{Backends: strings.Repeat("b", 1000)}
	recs[5].Service = &flow.Service{Backends: long}
	b, _ := e.encode(nil, recs)
	if e.cutEnr != 1 {
		t.Errorf("%d strings cut, want 1", e.cutEnr)
	}
	var c Columns
	if err := decodeBlock(b, true, &c); err != nil {
		t.Fatal(err)
	}
	if c.Service[3].Backends != recs[3].Service.Backends || c.Service[5].Backends != long[:maxLongStr] || c.Service[0] != nil {
		t.Errorf("backends %d and %d bytes", len(c.Service[3].Backends), len(c.Service[5].Backends))
	}
}

// goldenV5Recs are the records of block-v5.bin: as version 4's, and
// workloads and services.
func goldenV5Recs() []flow.Record {
	return withEnrich(goldenV4Recs()[:250], 5)
}

// TestWriteGoldenV5 writes testdata/block-v5.bin when WEIR_STORE_GOLDEN is
// set (once, when version 5 was current; never overwrite it after).
func TestWriteGoldenV5(t *testing.T) {
	if os.Getenv("WEIR_STORE_GOLDEN") == "" {
		t.Skip("set WEIR_STORE_GOLDEN=1 to write testdata/block-v5.bin")
	}
	b, _ := newTestEncoder(t).encode(nil, goldenV5Recs())
	if b[12] != 5 {
		t.Fatalf("version %d", b[12])
	}
	if err := os.WriteFile(filepath.Join("testdata", "block-v5.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestEnrichStore: enriched records written through a Store read back
// with their workloads and services (and old-version blocks read them as
// nil: TestOldBlocks); reading only ColService decodes only its columns.
func TestEnrichStore(t *testing.T) {
	dir := tempDir(t)
	s := openT(t, Config{Dir: dir, NoSync: true, TimePrecision: time.Nanosecond})
	recs := withEnrich(mkRecs(500, 1, "x", t0), 3)
	if err := s.Write(recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	rows, failed := readAll(t, r)
	if failed != 0 {
		t.Fatalf("%d blocks failed", failed)
	}
	sameRows(t, rows, recs)
	bl, _ := r.Blocks(0, 0, nil)
	var c Columns
	if err := r.ReadBlock(&bl[0], ColService|ColServiceMatch, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Service) != c.N || len(c.ServiceMatch) != c.N || len(c.SrcWorkload) != 0 || len(c.Packets) != 0 {
		t.Errorf("ColService read %d services, %d matches, %d workloads, %d packets of %d rows",
			len(c.Service), len(c.ServiceMatch), len(c.SrcWorkload), len(c.Packets), c.N)
	}
	if lo, hi, ok := bl[0].Range(ColServiceMatch); !ok || lo != 0 || hi != uint64(flow.ServiceMatchAmbiguous) {
		t.Errorf("Range(ColServiceMatch) = %d..%d %v", lo, hi, ok)
	}
}
