package store

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// orderCase is a batch of rows the write path takes as one block.
type orderCase struct {
	name string
	prec time.Duration
	recs func() []flow.Record
}

// orderCases cover each way the write path orders and encodes a block:
// rows out of Start order with only hot columns (the permutation), with
// every column in use and with differing nodes (gathered), with one node
// name (the permutation: a one-value column is the same in any order), in
// order (no sort), below and above the two-goroutine threshold, and at 1
// ns precision over a span too wide for packed sort keys.
func orderCases() []orderCase {
	every := func() []flow.Record { // every column in use, in random Start order, 8 copies
		r := rand.New(rand.NewPCG(5, 6))
		var out []flow.Record
		for k := 0; k < 8; k++ {
			for _, rec := range goldenV8Recs() {
				rec.Start += r.Int64N(int64(5 * time.Minute))
				rec.End = rec.Start + r.Int64N(int64(time.Minute))
				out = append(out, rec)
			}
		}
		return out
	}
	nodes := func(names ...string) func() []flow.Record {
		return func() []flow.Record {
			recs := slices.Clone(windows()[1])
			for i := range recs {
				recs[i].Node = names[i%len(names)]
			}
			return recs
		}
	}
	return []orderCase{
		{"shuffled", 0, func() []flow.Record { return slices.Clone(windows()[0]) }},
		{"shuffled, few rows", 0, func() []flow.Record { return slices.Clone(windows()[3][:700]) }},
		{"every column", 0, every},
		{"one node", 0, nodes("node-a")},
		{"nodes differ", 0, nodes("node-a", "node-b", "node-c")},
		{"in order", 0, func() []flow.Record {
			recs := slices.Clone(windows()[2])
			slices.SortStableFunc(recs, func(a, b flow.Record) int { return cmp.Compare(a.Start, b.Start) })
			return recs
		}},
		{"ns, wide span", time.Nanosecond, func() []flow.Record {
			recs := slices.Clone(windows()[4])
			r := rand.New(rand.NewPCG(7, 8))
			for i := range recs {
				recs[i].Start = t0 + r.Int64N(1<<50)
				recs[i].End = recs[i].Start + r.Int64N(int64(time.Minute))
			}
			return recs
		}},
	}
}

// TestEncodeRankedMatchesSorted: the write path's encoding from the
// sort's permutation (order, then encodeRanked) gives the very bytes that
// encoding the rows gathered into Start order gives, for every case.
func TestEncodeRankedMatchesSorted(t *testing.T) {
	s := &Store{}
	ranked, sorted := newTestEncoder(t), newTestEncoder(t)
	for _, tc := range orderCases() {
		s.cfg.TimePrecision = cmp.Or(tc.prec, DefaultTimePrecision)
		recs := tc.recs()
		lo, hi := recs[0].Start, recs[0].Start
		inOrder := true
		for i := range recs {
			lo, hi = min(lo, recs[i].Start), max(hi, recs[i].Start)
			inOrder = inOrder && (i == 0 || recs[i].Start >= recs[i-1].Start)
		}
		rows, perm, rank := s.order(recs, inOrder, lo, hi)
		if (perm == nil) != inOrder {
			t.Fatalf("%s: perm %v for rows in order %v", tc.name, perm != nil, inOrder)
		}
		got, _ := ranked.encodeRanked(nil, rows, perm, rank)
		want, _ := sorted.encode(nil, slices.Clone(s.gather(rows, perm)))
		if string(got) != string(want) {
			t.Errorf("%s: the block from the permutation differs from the sorted rows' (%d and %d bytes)", tc.name, len(got), len(want))
		}
	}
}

// writeGolden is the SHA-256 of the block files the write path made for
// orderCases, one store each, by main at 91ec564 (format 9) before the
// encoder took the sort's permutation: the blocks must stay byte for byte
// the same. A new block format records its own (10: recorded by the
// branch that added it, its first writer).
var writeGolden = map[int]map[string]string{
	9: {
		"shuffled":           "bcaefa47fd08f35356175db9158f05d15b6d34d76bcfd3ba3b83c3976ec58c08",
		"shuffled, few rows": "b6d197d7be9b59e1c99f2ab5342bb510185aa2e393d24b2638a82994b3c7d320",
		"every column":       "9c95fec01435c25e1a827812a8a2c3227d26185cc821aec0292eceba42c987c9",
		"one node":           "99914a158b77e1a5d9691723b3118e020e8a461d4aa1c4e7da369ee5cea01684",
		"nodes differ":       "8b4a06cea3461eefd93be8c1e98bb3205d3ac5141442df77141e0197fc47191e",
		"in order":           "62f4c39824237471964262acaa59df9751a6fb0c7b7e0c42ea58e578d9f5abe9",
		"ns, wide span":      "1db04dc6c8048e308544a8629707956331b67f65e82ec676b8c2fbc3002467cd",
	},
	10: { // this branch's writer, format 10 (flag 16: RevBytes' rows without packets left out)
		"shuffled":           "6d59e6d27737f9d4d61f4fe1ce1bb1f7d1fa9e5b156f67d848bba59d0c3d8b8a",
		"shuffled, few rows": "27e72beebc9e89de5a8c685cda5ab96ac477f88042cd115bd6e8bc92f88e78f6",
		"every column":       "a18881aa470d24ba762aae2fcf55a4c65ac2a93f033e68a77e0636d09fc983a6",
		"one node":           "7a442f227290f2256e31c1185b99251294d51d4ee33a672c8d8705753ae49763",
		"nodes differ":       "1c135c6b61705b24b6277dafd9b3e933afb8c13c4fb1cf4579184369ffdc04ad",
		"in order":           "4ab4384aba77532de0eb512ac9de8ecb2f131f6dbae49bb979ccf8b9b81bac92",
		"ns, wide span":      "dea10fda95f9e3a96a2483222cdbb1374b5a50406bfedd7fac3abb32000dc7cf",
	},
	11: { // format 11's writer
		"shuffled":           "842986b3de027ae514c1c2427c45a1d37b55e94d240a1317a116fcfd48d78890",
		"shuffled, few rows": "384bde8a2289b8b61ca9547702db40e68550dcbc2765a4fd34c3d7bfad9badc4",
		"every column":       "0d3084301f68d083e0a0b2d12ace3f580f406df0115cb95e8d8435eb9d0b50e4",
		"one node":           "9fde248253b36088926245a80ac41beebd47bad7493d38a4980e195f74f09f12",
		"nodes differ":       "63130bd559c643ccd083eca7c9d9c2db242becdf450271ad0e0426d18109d678",
		"in order":           "48bd4079c26b6e8a8fecbfbe394529216def5810b6d98c965b44b36f7b03e572",
		"ns, wide span":      "88020886f3f2bc81a7e054f37d28200a7661d54014708b6767fdc19a17765ebe",
	},
	12: { // format 12's writer (address-set classes by use, port range filters)
		"shuffled":           "7d0ade2d300f4328650d118484d4676e8e1ae4d0633b89c4606d4b63102a0566",
		"shuffled, few rows": "7f2f7b842f74ad097ea2e651e1788dfbe4fc107e71753c92559e133fa874af80",
		"every column":       "7ebf8ba977ee417b53536dcfaf336a93c5aaefde33ee9e8eb83de8856bb6ca81",
		"one node":           "9096f630142a688f61c69b2cfbcdb2cab9d41a7003866d9b365e47a4ed193f8f",
		"nodes differ":       "d47b290efeb4ae27bea372e4c80637a954c64a44c61cf50b3849a1fb6a430112",
		"in order":           "74f3054362a222170c5566e4b5f8d05851f458751f105cb086c7f5c3a32918ba",
		"ns, wide span":      "811bdc78c84954a85038449d3c8f0a838b6cbe9c69a16f1456cf3e9c85bd8b9d",
	},
}

// TestWriteGoldenBlocks: each case written through Write and Flush gives
// the block bytes main's writer gave.
func TestWriteGoldenBlocks(t *testing.T) {
	want, ok := writeGolden[blockVersion]
	if !ok {
		t.Fatalf("no golden block hashes for block format %d: record them (WEIR_STORE_GOLDEN=1 prints them)", blockVersion)
	}
	for _, tc := range orderCases() {
		dir := tempDir(t)
		s := openT(t, Config{Dir: dir, NoSync: true, Writeout: time.Hour, TimePrecision: tc.prec})
		if err := s.Write(tc.recs()); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		n := 0
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.Name() != dataName {
				return err
			}
			b, err := os.ReadFile(path)
			fmt.Fprintf(h, "%s %d\n", d.Name(), len(b))
			h.Write(b)
			n++
			return err
		})
		if err != nil || n == 0 {
			t.Fatalf("%s: %d block files: %v", tc.name, n, err)
		}
		got := hex.EncodeToString(h.Sum(nil))
		if os.Getenv("WEIR_STORE_GOLDEN") != "" {
			fmt.Printf("\t\t%q: %q,\n", tc.name, got)
		}
		if got != want[tc.name] {
			t.Errorf("%s: blocks hash to %s, main's to %q", tc.name, got, want[tc.name])
		}
	}
}

// TestBlockCut: rows whose node names would pass maxColRaw are cut where
// the column's bytes would pass it, also past the row count below which
// blockCut needs no pass over the rows; rows that fit are not cut.
func TestBlockCut(t *testing.T) {
	long := string(make([]byte, maxLongStr+100)) // counted at maxLongStr
	for _, tc := range []struct {
		rows int
		node string
		want int
	}{
		{5000, long, 5000},
		{70_000, "n", 70_000},
		{70_000, long, (maxColRaw - 1024) / (maxLongStr + 8)},
	} {
		rows := make([]flow.Record, tc.rows)
		for i := range rows {
			rows[i].Node = tc.node
		}
		if got := blockCut(rows); got != tc.want {
			t.Errorf("%d rows with %d-byte nodes: cut at %d, want %d", tc.rows, len(tc.node), got, tc.want)
		}
	}
}
