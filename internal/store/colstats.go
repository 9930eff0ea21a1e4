package store

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/weir-dev/weir/internal/format"
)

// colNames are the stored columns' names, in id order.
var colNames = [numCols]string{"SrcAddr", "DstAddr", "IPVersion", "SrcPort", "DstPort", "Proto", "ICMPType",
	"ICMPCode", "Packets", "Bytes", "RevPackets", "RevBytes", "TCPFlags", "RevTCPFlags", "EndReason", "VLAN",
	"Start", "End", "DropPackets", "DropBytes", "DropReason", "Sampling", "NATSrcAddr", "NATDstAddr", "NATVersion",
	"NATSrcPort", "NATDstPort", "Verdict", "Rule", "Mark", "Zone", "SrcWlName", "SrcWlNamespace", "SrcWlNode",
	"DstWlName", "DstWlNamespace", "DstWlNode", "SvcName", "SvcBackends", "SvcGroup", "ServiceMatch", "Node"}

// ColumnStat is one stored column's share of the blocks ColumnStats read.
type ColumnStat struct {
	Name      string
	Stored    int64          // bytes on disk (after compression)
	Raw       int64          // bytes of its encoded stream before compression
	Blocks    int            // blocks that store it (the others omit it: all zero)
	Encodings map[string]int // encoding name (e.g. "dict+seg") → blocks
}

// ColumnReport is where a store's block bytes go, column by column, from
// the blocks' directories (no column is decoded).
type ColumnReport struct {
	Blocks, Rows int64
	BlockBytes   int64 // all block bytes: headers and columns
	HeaderBytes  int64 // fixed headers, column directories, bloom filters, CRCs
	BloomBytes   int64 // the bloom filters' share of HeaderBytes
	Columns      [numCols]ColumnStat
}

// ColumnStats sums the column directories of the blocks Blocks(from, to,
// ifaces) lists. Damaged blocks are left out (Blocks skips them).
func (s *Store) ColumnStats(from, to int64, ifaces []string) (ColumnReport, error) {
	var r ColumnReport
	bl, err := s.Blocks(from, to, ifaces)
	if err != nil {
		return r, err
	}
	for id := range r.Columns {
		r.Columns[id] = ColumnStat{Name: colNames[id], Encodings: map[string]int{}}
	}
	for i := range bl {
		h := bl[i].h
		r.Blocks++
		r.Rows += int64(h.rows)
		r.BlockBytes += int64(h.blockLen)
		r.HeaderBytes += int64(h.headerLen)
		for _, b := range h.blooms {
			r.BloomBytes += 8 + 8*int64(len(b.words))
		}
		for id := range h.ncols {
			if h.omit&(1<<uint(id)) != 0 {
				continue
			}
			c, m := &r.Columns[id], &h.cols[id]
			c.Stored += int64(m.slen)
			c.Raw += int64(m.rlen)
			c.Blocks++
			c.Encodings[encName(m.enc, m.comp, m.flags)]++
		}
	}
	return r, nil
}

// Summary is the report as a table: bytes per row stored and raw, and
// the encodings chosen, for every column some block stores.
func (r *ColumnReport) Summary() string {
	var sb strings.Builder
	per := func(b int64) float64 { return float64(b) / float64(max(r.Rows, 1)) }
	fmt.Fprintf(&sb, "%s rows in %s blocks: %.3f B/row in blocks\n", format.Int(r.Rows), format.Int(r.Blocks), per(r.BlockBytes))
	fmt.Fprintf(&sb, "%-15s %8s %9s  %s\n", "column", "B/row", "raw B/row", "encodings (blocks)")
	for _, c := range r.Columns {
		if c.Blocks == 0 {
			continue
		}
		var enc []string
		for _, k := range slices.Sorted(maps.Keys(c.Encodings)) {
			enc = append(enc, fmt.Sprintf("%s:%d", k, c.Encodings[k]))
		}
		fmt.Fprintf(&sb, "%-15s %8.3f %9.3f  %s\n", c.Name, per(c.Stored), per(c.Raw), strings.Join(enc, " "))
	}
	fmt.Fprintf(&sb, "%-15s %8.3f %9s  (bloom filters %.3f)\n", "headers", per(r.HeaderBytes), "", per(r.BloomBytes))
	return sb.String()
}

// encName names a column's encoding and compression.
func encName(enc, comp, flags uint8) string {
	n := ""
	switch enc {
	case encConst:
		n = "const"
	case encFOR:
		n = "for"
	case encDelta:
		n = "delta"
	case encDeltaU:
		n = "deltau"
	case encDict:
		n = "dict"
	case encDictE:
		n = "dicte"
	case encADict:
		n = "adict"
	case encADictD:
		n = "adictd"
	case encADictS:
		n = "adicts"
	case encARaw:
		n = "araw"
	case encSDict:
		n = "sdict"
	case encSDictL:
		n = "sdictl"
	case encTuple:
		n = "tuple"
	default:
		n = fmt.Sprint(enc)
	}
	switch comp {
	case compZstd:
		n += "+zstd"
	case compSeg:
		n += "+seg"
	}
	if flags&flagEndRel != 0 {
		n += "+rel"
	}
	if flags&flagPerPkt != 0 {
		n += "+perpkt"
	}
	if flags&flagNoPkt != 0 {
		n += "+nopkt"
	}
	if flags&flagRatio != 0 {
		n += "+ratio"
	}
	return n
}
