package store

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestReadFirstMore: reading a block's condition columns first
// (ReadFirst) and the rest later (ReadMore) gives the columns ReadBlock of
// them all gives, for splits where a later column needs an earlier one's
// stream (per-packet bytes need packets, relative ends need starts) or one
// outside the bytes ReadFirst read; ReadFirst decodes nothing beyond its
// first columns, and ReadMore refuses Columns of another block.
func TestReadFirstMore(t *testing.T) {
	s := openT(t, Config{Writeout: time.Hour})
	defer s.Close()
	g := newGen(9)
	for w := range 3 {
		s.Write(g.window(nil, 3000, t0+int64(w)*int64(5*time.Minute), "eth1"))
		s.Flush()
	}
	bl, _ := s.Blocks(0, 0, nil)
	if len(bl) < 2 {
		t.Fatalf("%d blocks", len(bl))
	}
	all := ColSrcAddrIdx | ColDstAddrIdx | ColDstPort | ColProto | ColPackets | ColBytes | ColRevPackets | ColRevBytes | ColStart | ColEnd
	for _, c := range []struct{ first, more, read Column }{
		{ColDstPort, all &^ ColDstPort, all},
		{ColDstPort | ColProto | ColStart, ColBytes | ColRevBytes | ColSrcAddrIdx, all}, // bytes without their packets
		{ColEnd, ColSrcAddrIdx | ColPackets, all},                                       // the end without its start
		{ColDstPort, ColSrcAddr | ColDstAddr | ColBytes, all},                           // columns outside what ReadFirst read
		{ColProto, ColDstPort, ColProto},                                                // no bytes to share
	} {
		for i := range bl {
			var want, got Columns
			if err := s.ReadBlock(&bl[i], c.first|c.more, &want); err != nil {
				t.Fatal(err)
			}
			if err := s.ReadFirst(&bl[i], c.first, c.read, &got); err != nil {
				t.Fatal(err)
			}
			if c.first&ColBytes == 0 && len(got.Bytes) != 0 || c.first&ColSrcAddrIdx == 0 && len(got.SrcIdx) != 0 {
				t.Fatalf("%b: ReadFirst decoded more than its first columns", c.first)
			}
			if err := s.ReadMore(&bl[i], c.more, &got); err != nil {
				t.Fatal(err)
			}
			if d := colsDiff(&got, &want); d != "" {
				t.Fatalf("block %d, first %b then %b: %s", i, c.first, c.more, d)
			}
		}
	}
	var c Columns
	if err := s.ReadFirst(&bl[0], ColDstPort, all, &c); err != nil {
		t.Fatal(err)
	}
	if err := s.ReadMore(&bl[1], ColBytes, &c); err == nil {
		t.Fatal("ReadMore took the columns of another block")
	}
}

// colsDiff says how a and b differ in the columns the test reads, "" when
// they do not.
func colsDiff(a, b *Columns) string {
	if a.N != b.N {
		return fmt.Sprintf("N %d, %d", a.N, b.N)
	}
	for _, c := range []struct {
		name string
		eq   bool
	}{
		{"SrcDict", slices.Equal(a.SrcDict, b.SrcDict)}, {"SrcIdx", slices.Equal(a.SrcIdx, b.SrcIdx)},
		{"DstDict", slices.Equal(a.DstDict, b.DstDict)}, {"DstIdx", slices.Equal(a.DstIdx, b.DstIdx)},
		{"SrcAddr", slices.Equal(a.SrcAddr, b.SrcAddr)}, {"DstAddr", slices.Equal(a.DstAddr, b.DstAddr)},
		{"IPVersion", slices.Equal(a.IPVersion, b.IPVersion)}, {"DstPort", slices.Equal(a.DstPort, b.DstPort)},
		{"Proto", slices.Equal(a.Proto, b.Proto)}, {"Packets", slices.Equal(a.Packets, b.Packets)},
		{"Bytes", slices.Equal(a.Bytes, b.Bytes)}, {"RevPackets", slices.Equal(a.RevPackets, b.RevPackets)},
		{"RevBytes", slices.Equal(a.RevBytes, b.RevBytes)}, {"Start", slices.Equal(a.Start, b.Start)},
		{"End", slices.Equal(a.End, b.End)},
	} {
		if !c.eq {
			return c.name + " differs"
		}
	}
	return ""
}
