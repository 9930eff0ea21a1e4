package store_test

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/gendb"
	"github.com/weir-dev/weir/internal/store"
)

// TestGendbEntropyBound measures how close the store comes to the
// information in 'weir bench gendb' rows, column by column: the bytes
// each column takes on disk (ColumnStats), the order-0 entropy of its
// values within each block (what a per-block coder with a free table
// could reach without looking at other columns), and the entropy of the
// generator's own distributions (the floor for any lossless coding; the
// rows are stored as a set sorted by Start, so the log2(n!) bits of their
// order are free and come off Start). 48 blocks (240,000 rows, the rows
// of every block are drawn alike); WEIR_STORE_WEEK=1 takes the week.
// go test -run GendbEntropyBound -v ./internal/store
func TestGendbEntropyBound(t *testing.T) {
	cfg := gendb.Config{Days: 1, BlocksPerDay: 288}
	blocks := 48
	if os.Getenv("WEIR_STORE_WEEK") != "" {
		cfg.Days, blocks = 7, 7*288
	}
	// A generous flush deadline: under the race detector on loaded cores
	// encoding a block of 5,000 rows took past the default 4 s.
	s, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true, Writeout: 24 * time.Hour, CloseTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var emp, dict [numEnt]float64 // bits, summed over blocks
	rows, n := 0, 0
	stop := fmt.Errorf("enough blocks")
	err = gendb.Generate(cfg, func(_ int64, recs []flow.Record) error {
		if n == blocks {
			return stop
		}
		n++
		rows += len(recs)
		blockEntropy(&emp, &dict, recs)
		if err := s.Write(recs); err != nil {
			return err
		}
		return s.Flush()
	})
	if err != nil && err != stop {
		t.Fatal(err)
	}
	rep, err := s.ColumnStats(0, 0, nil)
	if err != nil || rep.Rows != int64(rows) {
		t.Fatalf("%d rows in the report of %d written: %v", rep.Rows, rows, err)
	}
	model := gendbModel(5000)
	col := map[string]float64{}
	for _, c := range rep.Columns {
		col[c.Name] = float64(c.Stored) / float64(rows)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d rows, %d blocks: %.3f B/row in blocks\n", rows, blocks, float64(rep.BlockBytes)/float64(rows))
	fmt.Fprintf(&sb, "%-34s %8s %8s %8s %8s\n", "columns", "stored", "order-0", "+dict", "model")
	var tot [3]float64
	for i, g := range entGroups {
		st := 0.0
		for _, c := range g.cols {
			st += col[c]
		}
		e := emp[i] / 8 / float64(rows)
		tot[0], tot[1], tot[2] = tot[0]+st, tot[1]+e, tot[2]+model[i]/8
		d := "-"
		if dict[i] > 0 {
			d = fmt.Sprintf("%.3f", e+dict[i]/8/float64(rows))
		}
		fmt.Fprintf(&sb, "%-34s %8.3f %8.3f %8s %8.3f\n", g.name, st, e, d, model[i]/8)
	}
	other := float64(rep.BlockBytes)/float64(rows) - tot[0]
	fmt.Fprintf(&sb, "%-34s %8.3f\n", "headers (bloom filters, directory)", other)
	fmt.Fprintf(&sb, "%-34s %8.3f %8.3f %8s %8.3f  (B/row; order-0 and model without headers)\n", "total", tot[0]+other, tot[1], "", tot[2])
	t.Log("\n" + sb.String())
	// No lossless coding beats the source's entropy: stored bytes under
	// the model would mean the model (or the accounting) is wrong.
	if tot[0] < tot[2] {
		t.Errorf("columns store %.3f B/row, under the generator's entropy %.3f", tot[0], tot[2])
	}
}

// Entropy groups: columns the generator draws together are measured
// together (Proto and the TCP flags follow from the service; IPVersion
// from the address).
const (
	eSrc = iota
	eDst
	eSrcPort
	eSvc
	ePackets
	eBytes
	eRevPackets
	eRevBytes
	eStart
	eEnd
	eReason
	numEnt
)

var entGroups = [numEnt]struct {
	name string
	cols []string
}{
	{"SrcAddr+IPVersion", []string{"SrcAddr", "IPVersion"}}, {"DstAddr", []string{"DstAddr"}}, {"SrcPort", []string{"SrcPort"}},
	{"DstPort+Proto+ICMPType+TCP flags", []string{"DstPort", "Proto", "ICMPType", "TCPFlags", "RevTCPFlags"}},
	{"Packets", []string{"Packets"}}, {"Bytes", []string{"Bytes"}}, {"RevPackets", []string{"RevPackets"}},
	{"RevBytes", []string{"RevBytes"}}, {"Start (sorted)", []string{"Start"}}, {"End", []string{"End"}},
	{"EndReason", []string{"EndReason"}},
}

// universe is the number of values a group's column can take in gendb's
// data (0: not counted): a block's dictionary of D distinct values out of
// U costs at least log2 C(U, D) bits, even to a coder that knows U.
var universe = [numEnt]float64{eSrc: 2 * 20000, eDst: 2 * 2000, eSrcPort: 28232 + 1}

// blockEntropy adds each group's order-0 entropy within recs, in bits
// (n·H of the block's values), to e, and for the groups with a known
// universe the least a block's dictionary of its distinct values costs to
// dict. Times are taken as the store keeps them: at 1 ms, Start as the
// gaps between sorted Starts, End as End-Start.
func blockEntropy(e, dict *[numEnt]float64, recs []flow.Record) {
	n := len(recs)
	keys := make([][]uint64, numEnt)
	for i := range keys {
		keys[i] = make([]uint64, n)
	}
	starts := make([]int64, n)
	for i := range recs {
		r := &recs[i]
		k := &r.Key
		keys[eSrc][i] = addrKey(k.SrcAddr)
		keys[eDst][i] = addrKey(k.DstAddr)
		keys[eSrcPort][i] = uint64(k.SrcPort)
		keys[eSvc][i] = uint64(k.DstPort)<<16 | uint64(k.Proto)<<8 | uint64(k.ICMPType)
		keys[ePackets][i] = r.Packets
		keys[eBytes][i] = r.Bytes
		keys[eRevPackets][i] = r.RevPackets
		keys[eRevBytes][i] = r.RevBytes
		s, end := floorMs(r.Start), -floorMs(-r.End)
		starts[i] = s
		keys[eEnd][i] = uint64(end - s)
		keys[eReason][i] = uint64(r.EndReason)
	}
	slices.Sort(starts)
	for i := range starts {
		if i > 0 {
			keys[eStart][i] = uint64(starts[i] - starts[i-1])
		}
	}
	for g := range keys {
		bits, d := order0(keys[g])
		e[g] += bits
		if u := universe[g]; u > 0 {
			dict[g] += log2Choose(u, float64(d))
		}
	}
}

// log2Choose is log2 of the binomial coefficient C(u, d).
func log2Choose(u, d float64) float64 {
	a, _ := math.Lgamma(u + 1)
	b, _ := math.Lgamma(d + 1)
	c, _ := math.Lgamma(u - d + 1)
	return (a - b - c) / math.Ln2
}

func floorMs(t int64) int64 {
	const ms = int64(time.Millisecond)
	r := t % ms
	if r < 0 {
		r += ms
	}
	return t - r
}

// addrKey folds an address into 64 bits (the generator's hosts differ
// in their last 4 bytes and in the family).
func addrKey(a [16]byte) uint64 {
	var k uint64
	for i, b := range a {
		k ^= uint64(b) << (8 * (i % 8))
		k = k*0x100000001b3 + uint64(i)
	}
	return k
}

// order0 is Σ c·log2(n/c) over the distinct values of v: the bits an
// ideal coder needs for v given the values' frequencies; and how many
// distinct values there are.
func order0(v []uint64) (float64, int) {
	c := map[uint64]int{}
	for _, x := range v {
		c[x]++
	}
	n := float64(len(v))
	bits := 0.0
	for _, k := range c {
		bits += float64(k) * math.Log2(n/float64(k))
	}
	return bits, len(c)
}

// zipfH is the entropy in bits of math/rand/v2's Zipf(s, v, imax):
// P(k) ∝ (v+k)^-s for k in 0..imax.
func zipfH(s, v float64, imax int) float64 {
	w := make([]float64, imax+1)
	sum := 0.0
	for k := range w {
		w[k] = math.Pow(v+float64(k), -s)
		sum += w[k]
	}
	h := 0.0
	for _, x := range w {
		p := x / sum
		h -= p * math.Log2(p)
	}
	return h
}

func h2(p float64) float64 { return -p*math.Log2(p) - (1-p)*math.Log2(1-p) }

// gendbModel is the entropy in bits per row of each group as gendb
// draws it (its default Config; see internal/gendb), for blocks of n
// rows. Each counter column is taken given the one it is drawn from
// (Bytes = Packets × U[60,260), RevPackets = Packets × U{1,2,3} / 2,
// RevBytes = RevPackets × U[60,1460)), which is how far below its own
// entropy a coder that knew those relations could go.
func gendbModel(n int) [numEnt]float64 {
	var m [numEnt]float64
	pICMP := 1.0 / 50
	m[eSrc] = zipfH(1.1, 8, 19999) + h2(0.05) // the host and the family
	m[eDst] = zipfH(1.2, 4, 1999)
	m[eSrcPort] = (1 - pICMP) * math.Log2(28232)
	m[eSvc] = h2(pICMP) + (1-pICMP)*zipfH(1.3, 1, 19)
	m[ePackets] = zipfH(1.5, 2, 1<<20)
	m[eBytes] = math.Log2(200)
	// Packets 1 (P(k=0) of the Zipf) gives RevPackets 0 or 1 (1/3, 2/3);
	// any other count three distinct values.
	w0 := 1 / zipfSum(1.5, 2, 1<<20) * math.Pow(2, -1.5)
	m[eRevPackets] = w0*h2(1.0/3) + (1-w0)*math.Log2(3)
	m[eRevBytes] = (1 - w0/3) * math.Log2(1400)
	lg, _ := math.Lgamma(float64(n + 1))
	m[eStart] = math.Log2(float64(5*time.Minute/time.Millisecond)) - lg/math.Ln2/float64(n)
	m[eEnd] = math.Log2(float64(5 * time.Minute / time.Millisecond))
	m[eReason] = 1.5
	return m
}

func zipfSum(s, v float64, imax int) float64 {
	sum := 0.0
	for k := 0; k <= imax; k++ {
		sum += math.Pow(v+float64(k), -s)
	}
	return sum
}
