package gendb

import (
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

var defaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func collect(t *testing.T, c Config) []flow.Record {
	t.Helper()
	var all []flow.Record
	if err := Generate(c, func(_ int64, recs []flow.Record) error {
		all = append(all, recs...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return all
}

// TestDeterministic: the same Config gives the same records; another seed
// does not.
func TestDeterministic(t *testing.T) {
	c := Config{Days: 1, BlocksPerDay: 4, FlowsPerBlock: 500}
	a, b := collect(t, c), collect(t, c)
	if len(a) != 2000 || int64(len(a)) != c.Rows() {
		t.Fatalf("%d rows, want 2000 (Rows says %d)", len(a), c.Rows())
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("row %d differs between runs", i)
		}
	}
	c.Seed = 2
	if d := collect(t, c); d[0] == a[0] && d[1] == a[1] {
		t.Fatal("seed 2 gives the same rows as seed 1")
	}
}

// TestShape: the distributions are what the package promises: ~5% IPv6,
// skewed hosts (the top client has far more flows than the median), times
// inside their block, both directions counted, valid keys.
func TestShape(t *testing.T) {
	c := Config{Days: 1, BlocksPerDay: 10, FlowsPerBlock: 5000, Ifaces: []string{"eth0", "eth1"}}
	recs := collect(t, c)
	v6, ifaces := 0, map[string]int{}
	perClient := map[[16]byte]int{}
	step := int64(24*3600e9) / 10
	start := defaultStart.UnixNano()
	for i, r := range recs {
		if r.Key.IPVersion == 6 {
			v6++
		} else if r.Key.Src().Is6() && !r.Key.Src().Is4In6() {
			t.Fatalf("row %d: IPv4 row with an IPv6 address", i)
		}
		perClient[r.Key.SrcAddr]++
		ifaces[r.Iface]++
		block := start + int64(i/5000)*step
		if r.Start < block || r.Start >= block+step || r.End < r.Start {
			t.Fatalf("row %d: start %d end %d outside block %d", i, r.Start, r.End, block)
		}
		if r.Packets == 0 || r.Bytes < r.Packets*60 {
			t.Fatalf("row %d: %d packets %d bytes", i, r.Packets, r.Bytes)
		}
	}
	if share := float64(v6) / float64(len(recs)); share < 0.04 || share > 0.06 {
		t.Errorf("IPv6 share %.3f, want about 0.05", share)
	}
	if len(ifaces) != 2 {
		t.Errorf("interfaces %v, want both", ifaces)
	}
	top := 0
	for _, n := range perClient {
		top = max(top, n)
	}
	if top < 20*len(recs)/len(perClient) {
		t.Errorf("top client has %d flows, mean %d: not skewed", top, len(recs)/len(perClient))
	}
}

// BenchmarkGenerate reports the cost of one generated row.
func BenchmarkGenerate(b *testing.B) {
	b.ReportAllocs()
	c := Config{Days: 1, BlocksPerDay: 1, FlowsPerBlock: 5000}
	for b.Loop() {
		_ = Generate(c, func(int64, []flow.Record) error { return nil })
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*c.Rows()), "ns/row")
}
