package store

import (
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// FuzzReadBlock feeds arbitrary bytes to the block parser and decoders,
// with CRCs checked (the real path) and skipped (to reach the decoders).
// It must never panic; a block that passes its CRCs must decode.
func FuzzReadBlock(f *testing.F) {
	e := newTestEncoder(f)
	g := newGen(1)
	for _, n := range []int{0, 1, 7, 300} {
		b, _ := e.encode(nil, g.window(nil, n, t0, "x"))
		f.Add(b)
	}
	b, _ := e.encode(nil, baseRecs(50))
	f.Add(b)
	// Drop and sampling columns: sparse drops with a few reasons, and
	// many distinct reasons (2-byte indexes, compressed).
	b, _ = e.encode(nil, withDrops(g.window(nil, 300, t0, "x"), 7, 100))
	f.Add(b)
	many := withDrops(baseRecs(400), 1, 0)
	for i := range many {
		many[i].DropReason = dropReasons[i%len(dropReasons)] + strings.Repeat("_", i%300/6)
	}
	b, _ = e.encode(nil, many)
	f.Add(b)
	// NAT, verdict, rule, mark and zone columns; and a block storing only
	// some sparse columns (the omitted bitmap and a short directory).
	b, _ = e.encode(nil, withNAT(g.window(nil, 300, t0, "x"), 3))
	f.Add(b)
	few := baseRecs(20)
	for i := range few {
		few[i].Zone, few[i].Rule = uint16(i), "r"
	}
	b, _ = e.encode(nil, few)
	f.Add(b)
	// Enrichment columns (version 5): workloads, services, matches; and
	// a block with only one of them (bits 32 and up of the bitmap).
	b, _ = e.encode(nil, withEnrich(g.window(nil, 300, t0, "x"), 4))
	f.Add(b)
	one := baseRecs(20)
	for i := range one {
		one[i].Service = &flow.Service{Group: strings.Repeat("g", 100+i)}
	}
	b, _ = e.encode(nil, one)
	f.Add(b)
	for _, gb := range goldenBlocks { // versions 1 to 5
		f.Add(readGolden(f, gb.file))
	}
	f.Add([]byte("WBK1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Columns
		if err := decodeBlock(data, true, &c); err == nil {
			h, _ := parseHeader(data, true)
			if c.N != h.rows || len(c.SrcAddr) != h.rows || len(c.End) != h.rows || len(c.DropReason) != h.rows || len(c.Sampling) != h.rows ||
				len(c.NATSrcAddr) != h.rows || len(c.NATDstPort) != h.rows || len(c.Rule) != h.rows || len(c.Zone) != h.rows ||
				len(c.SrcWorkload) != h.rows || len(c.DstWorkload) != h.rows || len(c.Service) != h.rows || len(c.ServiceMatch) != h.rows {
				t.Fatalf("decoded %d rows, header says %d", c.N, h.rows)
			}
		}
		_ = decodeBlock(data, false, &c)
		_, _ = parseIndex(data)
	})
}
