package store

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// testNodes are node names as agents and collectors set them: host
// names, an exporter's address, a long FQDN and a non-ASCII name.
var testNodes = []string{"node-a", "node-b", "192.0.2.7", strings.Repeat("n", 200) + ".example.internal", "ünï-node"}

// withNodes gives every record a node: record i gets testNodes[i%k],
// every every-th none ("").
func withNodes(recs []flow.Record, k, every int) []flow.Record {
	for i := range recs {
		recs[i].Node = testNodes[i%k]
		if every > 0 && i%every == 0 {
			recs[i].Node = ""
		}
	}
	return recs
}

// goldenV6Recs are the records of block-v6.bin: as version 5's, and
// nodes (every 9th record without one).
func goldenV6Recs() []flow.Record {
	return withNodes(withEnrich(goldenV4Recs()[:260], 5), len(testNodes), 9)
}

// TestWriteGoldenV6 writes testdata/block-v6.bin when WEIR_STORE_GOLDEN is
// set (once, when version 6 was current; never overwrite it after).
func TestWriteGoldenV6(t *testing.T) {
	if os.Getenv("WEIR_STORE_GOLDEN") == "" {
		t.Skip("set WEIR_STORE_GOLDEN=1 to write testdata/block-v6.bin")
	}
	b, _ := newTestEncoder(t).encode(nil, goldenV6Recs())
	if b[12] != 6 {
		t.Fatalf("version %d", b[12])
	}
	if err := os.WriteFile(filepath.Join("testdata", "block-v6.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNodeRoundTrip: the node column decodes to the names written, mixed
// or constant; a block without nodes leaves the column out; a constant
// node is a one-entry dictionary without index planes; its range is the
// names' lengths.
func TestNodeRoundTrip(t *testing.T) {
	e := newTestEncoder(t)
	t.Run("none", func(t *testing.T) {
		h := roundTrip(t, e, newGen(5).window(nil, 2000, t0, "x"))
		if h.omit&(1<<cNode) == 0 {
			t.Error("node column stored for records without a node")
		}
	})
	t.Run("mixed", func(t *testing.T) {
		h := roundTrip(t, e, withNodes(newGen(6).window(nil, 3000, t0, ""), len(testNodes), 7))
		c := h.cols[cNode]
		if h.omit&(1<<cNode) != 0 || c.enc != encSDictL {
			t.Fatalf("node column omitted %v, enc %d", h.omit&(1<<cNode) != 0, c.enc)
		}
		if c.min != 0 || c.max != uint64(len(testNodes[3])) {
			t.Errorf("node lengths %d..%d", c.min, c.max)
		}
	})
	t.Run("constant", func(t *testing.T) {
		recs := withNodes(newGen(7).window(nil, 5000, t0, ""), 1, 0)
		h := roundTrip(t, e, recs)
		c := h.cols[cNode]
		// u32 size, u8 index width 0, uvarint length, the name: no byte per row.
		if want := 4 + 1 + 1 + len("node-a"); int(c.rlen) != want || c.slen != c.rlen {
			t.Errorf("constant node: %d raw bytes, %d stored, want %d", c.rlen, c.slen, want)
		}
		if c.min != 6 || c.max != 6 {
			t.Errorf("node lengths %d..%d", c.min, c.max)
		}
	})
	t.Run("long", func(t *testing.T) {
		recs := baseRecs(10)
		long := strings.Repeat("é", maxLongStr) // 2×maxLongStr bytes
		recs[4].Node = long
		b, _ := e.encode(nil, recs)
		if e.cutNode != 1 {
			t.Errorf("%d node names cut, want 1", e.cutNode)
		}
		var c Columns
		if err := decodeBlock(b, true, &c); err != nil {
			t.Fatal(err)
		}
		if c.Node[4] != long[:maxLongStr] || c.Node[3] != "" {
			t.Errorf("node %d bytes, neighbour %q", len(c.Node[4]), c.Node[3])
		}
	})
}

// TestNodeCost measures what a node costs on disk through a Store: the
// same realistic rows with no node, one constant node, and two nodes
// (in runs of 64 as written, mixed once the block is sorted by Start).
// A constant node costs its dictionary entry and directory entry per
// block: under 0.02 bytes a row at 5000 rows a block; two mixed nodes
// about their entropy, a bit a row.
func TestNodeCost(t *testing.T) {
	size := func(node func(i int) string) (perRow float64) {
		dir := tempDir(t)
		s := openT(t, Config{Dir: dir, NoSync: true, Writeout: time.Hour})
		var batch []flow.Record
		rows := 0
		for w := range 6 {
			batch = shifted(batch, w)
			for i := range batch {
				batch[i].Node = node(rows + i)
			}
			rows += len(batch)
			if err := s.Write(batch); err != nil {
				t.Fatal(err)
			}
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		st := s.Stats()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return float64(st.BytesOnDisk) / float64(rows)
	}
	none := size(func(int) string { return "" })
	one := size(func(int) string { return "k8s-worker-17.prod.example.net" })
	two := size(func(i int) string { return testNodes[i/64%2] })
	t.Logf("bytes/row on disk: no node %.3f, one node %.3f (+%.4f), two nodes %.3f (+%.4f)",
		none, one, one-none, two, two-none)
	if one-none > 0.02 {
		t.Errorf("a constant node costs %.4f bytes/row, want under 0.02", one-none)
	}
	if two-none > 0.2 { // an index plane of 0s and 1s: entropy-coded to about a bit a row
		t.Errorf("two nodes cost %.4f bytes/row", two-none)
	}
}

// TestNodeStore: records of several nodes written through a Store read
// back with their nodes, ColNode alone decodes only that column, and
// Range(ColNode) gives the names' lengths.
func TestNodeStore(t *testing.T) {
	dir := tempDir(t)
	s := openT(t, Config{Dir: dir, NoSync: true, TimePrecision: time.Nanosecond})
	recs := withNodes(mkRecs(500, 1, "x", t0), 3, 0)
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
	if err := r.ReadBlock(&bl[0], ColNode, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Node) != c.N || len(c.Packets) != 0 || len(c.SrcAddr) != 0 {
		t.Errorf("ColNode read %d nodes, %d packets, %d addresses of %d rows", len(c.Node), len(c.Packets), len(c.SrcAddr), c.N)
	}
	if lo, hi, ok := bl[0].Range(ColNode); !ok || lo != 6 || hi != uint64(len(testNodes[2])) {
		t.Errorf("Range(ColNode) = %d..%d %v", lo, hi, ok)
	}
}

// TestNodes: Nodes lists a block's distinct nodes ("" for records
// without one) from its node column alone, and says "" for a block
// without any; a damaged node column is damage, counted.
func TestNodes(t *testing.T) {
	dir := tempDir(t)
	s := openT(t, Config{Dir: dir, NoSync: true, TimePrecision: time.Nanosecond})
	if err := s.Write(withNodes(mkRecs(300, 1, "x", t0), 3, 4)); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(mkRecs(10, 1000, "y", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	bl, _ := r.Blocks(0, 0, nil)
	if len(bl) != 2 {
		t.Fatalf("%d blocks", len(bl))
	}
	for _, b := range bl {
		got, err := r.Nodes(&b, nil)
		slices.Sort(got)
		want := []string{""}
		if b.Iface == "x" {
			want = []string{"", "192.0.2.7", "node-a", "node-b"}
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: nodes %q, %v; want %q", b.Iface, got, err, want)
		}
	}
	// Damage the node column's bytes: its CRC fails.
	x := bl[0]
	if x.Iface != "x" {
		x = bl[1]
	}
	c := x.h.cols[cNode]
	part := filepath.Join(dir, escapeIface("x"), "2025-03-01", dataName)
	data, err := os.ReadFile(part)
	if err != nil {
		t.Fatal(err)
	}
	data[x.Offset+int64(c.off)] ^= 0xff
	if err := os.WriteFile(part, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Nodes(&x, nil); !errors.Is(err, ErrCorrupt) || r.Stats().CorruptBlocks != 1 {
		t.Errorf("damaged node column: %v, %d corrupt", err, r.Stats().CorruptBlocks)
	}
}
