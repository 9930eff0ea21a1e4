package store

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestColumnBytes writes the realistic generator's 12 windows through a
// Store at the default settings and reports, from the blocks' column
// directories, where the stored bytes go (go test -run ColumnBytes -v).
// It checks that the header and the columns account for every block byte.
func TestColumnBytes(t *testing.T) {
	ws := windows()
	s := openT(t, Config{Dir: tempDir(t), NoSync: true, Writeout: time.Hour})
	for _, w := range ws {
		if err := s.Write(w); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	bl, err := s.Blocks(0, 0, nil)
	if err != nil || len(bl) != len(ws) {
		t.Fatalf("%d blocks, %v", len(bl), err)
	}
	var stored, raw [numCols]int
	var encs [numCols]map[string]int
	rows, header, total := 0, 0, 0
	for _, b := range bl {
		h := b.h
		sum := h.headerLen
		for id := range h.cols {
			c := &h.cols[id]
			stored[id] += int(c.slen)
			raw[id] += int(c.rlen)
			if encs[id] == nil {
				encs[id] = map[string]int{}
			}
			if h.omit&(1<<id) != 0 {
				encs[id]["omitted"]++
				continue
			}
			encs[id][encName(c.enc, c.comp, c.flags)]++
			sum += int(c.slen)
		}
		if sum != b.Size || sum != h.blockLen {
			t.Errorf("block at %d: header and columns hold %d bytes, block is %d", b.Offset, sum, b.Size)
		}
		rows += b.Rows
		header += h.headerLen
		total += b.Size
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d rows in %d blocks: %.2f B/row in blocks\n", rows, len(bl), float64(total)/float64(rows))
	fmt.Fprintf(&sb, "%-12s %8s %8s  %s\n", "column", "B/row", "raw B/row", "encodings (blocks)")
	for id := range numCols {
		fmt.Fprintf(&sb, "%-12s %8.3f %8.3f  %v\n", colNames[id], float64(stored[id])/float64(rows), float64(raw[id])/float64(rows), encs[id])
	}
	fmt.Fprintf(&sb, "%-12s %8.3f\n", "header", float64(header)/float64(rows))
	t.Log("\n" + sb.String())
}

// TestColumnStats: ColumnStats accounts for every block byte (headers
// plus the stored columns), counts the rows written, names the encodings,
// and leaves the omitted columns at zero.
func TestColumnStats(t *testing.T) {
	ws := windows()[:3]
	s := openT(t, Config{Dir: tempDir(t), NoSync: true, Writeout: time.Hour})
	for _, w := range ws {
		if err := s.Write(w); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	r, err := s.ColumnStats(0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := r.HeaderBytes
	for _, c := range r.Columns {
		sum += c.Stored
	}
	if r.Blocks != 3 || r.Rows != int64(3*benchRows) || sum != r.BlockBytes || r.BloomBytes <= 0 || r.BloomBytes >= r.HeaderBytes {
		t.Fatalf("report %+v: headers and columns sum to %d", r, sum)
	}
	if c := r.Columns[cSrcAddr]; c.Blocks != 3 || c.Encodings["adictd+seg"] != 3 || c.Stored == 0 || c.Raw <= c.Stored {
		t.Errorf("SrcAddr: %+v", c)
	}
	if c := r.Columns[cDropReason]; c.Blocks != 0 || c.Stored != 0 {
		t.Errorf("DropReason (all empty) stored: %+v", c)
	}
	if out := r.Summary(); !strings.Contains(out, "SrcAddr") || strings.Contains(out, "DropReason") || !strings.Contains(out, "15,000 rows in 3 blocks") {
		t.Errorf("summary:\n%s", out)
	}
}
