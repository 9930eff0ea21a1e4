package store

import (
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// TestAddrDict: with ColSrcAddr/ColDstAddr, Dict[Idx[i]] is row i's
// address, for a dictionary-encoded block (few distinct addresses: each
// once in Dict) and for a raw one (every address distinct), with no
// allocation once the Columns has grown.
func TestAddrDict(t *testing.T) {
	s := openT(t, Config{Dir: tempDir(t), NoSync: true, Writeout: time.Hour})
	const n = 3000
	few, many := make([]flow.Record, n), make([]flow.Record, n)
	for i := range n {
		few[i].Key.SrcAddr = addr4(10, 0, 0, byte(i%7))
		few[i].Key.DstAddr = addr4(10, 1, 0, byte(i%3))
		many[i].Key.SrcAddr = [16]byte{0x20, 1, 0xd, 0xb8, 12: byte(i >> 8), 13: byte(i), 14: 0x5a, 15: byte(i * 7)}
		many[i].Key.DstAddr = addr4(172, 16, byte(i>>8), byte(i))
		for _, r := range []*flow.Record{&few[i], &many[i]} {
			r.Key.IPVersion, r.Iface, r.Packets, r.Start, r.End = 4, "eth0", 1, t0+int64(i), t0+int64(i)
		}
		many[i].Key.IPVersion = 6 // src is IPv6 (dst stays IPv4-mapped: the column mixes them)
	}
	for _, batch := range [][]flow.Record{few, many} {
		if err := s.Write(batch); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	bl, err := s.Blocks(0, 0, nil)
	if err != nil || len(bl) != 2 {
		t.Fatalf("%d blocks, %v", len(bl), err)
	}
	var c Columns
	for bi, want := range [][]flow.Record{few, many} {
		if err := s.ReadBlock(&bl[bi], ColSrcAddr|ColDstAddr, &c); err != nil {
			t.Fatal(err)
		}
		if len(c.SrcIdx) != n || len(c.DstIdx) != n {
			t.Fatalf("block %d: %d/%d indexes, want %d", bi, len(c.SrcIdx), len(c.DstIdx), n)
		}
		// Rows may come back in any order: compare the multisets.
		got := map[[2][16]byte]int{}
		for i := range n {
			if c.SrcDict[c.SrcIdx[i]] != c.SrcAddr[i] || c.DstDict[c.DstIdx[i]] != c.DstAddr[i] {
				t.Fatalf("block %d row %d: dict[idx] differs from the row", bi, i)
			}
			got[[2][16]byte{c.SrcAddr[i], c.DstAddr[i]}]++
		}
		for _, r := range want {
			got[[2][16]byte{r.Key.SrcAddr, r.Key.DstAddr}]--
		}
		for k, v := range got {
			if v != 0 {
				t.Fatalf("block %d: %v off by %d", bi, k, v)
			}
		}
		if bi == 0 && (len(c.SrcDict) != 7 || len(c.DstDict) != 3) {
			t.Errorf("few distinct: dictionaries of %d and %d, want 7 and 3", len(c.SrcDict), len(c.DstDict))
		}
	}
	allocs := testing.AllocsPerRun(20, func() {
		for i := range bl {
			if err := s.ReadBlock(&bl[i], ColSrcAddr|ColDstAddr, &c); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 && !raceEnabled {
		t.Errorf("%v allocations per ReadBlock pair", allocs)
	}
}

func addr4(a, b, c, d byte) [16]byte { return [16]byte{10: 0xff, 11: 0xff, 12: a, 13: b, 14: c, 15: d} }

// TestAddrIdxOnly: ColSrcAddrIdx/ColDstAddrIdx alone fill the dictionaries,
// indexes and IPVersion but no per-row addresses, for a dictionary-encoded
// and a raw-encoded block; asked with ColSrcAddr/ColDstAddr they agree with
// the rows; steady-state reads do not allocate.
func TestAddrIdxOnly(t *testing.T) {
	s := openT(t, Config{Dir: tempDir(t), NoSync: true, Writeout: time.Hour})
	const n = 2000
	few, many := make([]flow.Record, n), make([]flow.Record, n)
	for i := range n {
		few[i].Key.SrcAddr = addr4(10, 0, 0, byte(i%5))
		few[i].Key.DstAddr = [16]byte{0x20, 1, 15: byte(i % 4)}
		few[i].Key.IPVersion = 4
		many[i].Key.SrcAddr = addr4(192, 168, byte(i>>8), byte(i))
		many[i].Key.DstAddr = [16]byte{0x20, 1, 0xd, 0xb8, 13: byte(i >> 8), 15: byte(i)}
		many[i].Key.IPVersion = 6
		for _, r := range []*flow.Record{&few[i], &many[i]} {
			r.Iface, r.Packets, r.Start, r.End = "eth0", uint64(i), t0+int64(i), t0+int64(i)
		}
	}
	for _, batch := range [][]flow.Record{few, many} {
		if err := s.Write(batch); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	bl, err := s.Blocks(0, 0, nil)
	if err != nil || len(bl) != 2 {
		t.Fatalf("%d blocks, %v", len(bl), err)
	}
	if e := bl[0].h.cols[cSrcAddr].enc; e != encADict {
		t.Fatalf("few distinct: encoding %d, want dict", e)
	}
	if e := bl[1].h.cols[cSrcAddr].enc; e != encARaw {
		t.Fatalf("all distinct: encoding %d, want raw", e)
	}
	var c, both Columns
	for bi, want := range [][]flow.Record{few, many} {
		if err := s.ReadBlock(&bl[bi], ColSrcAddrIdx|ColDstAddrIdx|ColPackets, &c); err != nil {
			t.Fatal(err)
		}
		if c.N != n || len(c.SrcAddr) != 0 || len(c.DstAddr) != 0 || len(c.IPVersion) != n ||
			len(c.SrcIdx) != n || len(c.DstIdx) != n {
			t.Fatalf("block %d: N %d, %d/%d rows, %d versions, %d/%d indexes", bi, c.N,
				len(c.SrcAddr), len(c.DstAddr), len(c.IPVersion), len(c.SrcIdx), len(c.DstIdx))
		}
		// Packets is the record's number: it finds the row whatever the order.
		for i := range n {
			r := &want[c.Packets[i]]
			if c.SrcDict[c.SrcIdx[i]] != r.Key.SrcAddr || c.DstDict[c.DstIdx[i]] != r.Key.DstAddr || c.IPVersion[i] != r.Key.IPVersion {
				t.Fatalf("block %d row %d: dict[idx] is not the record's address", bi, i)
			}
		}
		if wantD := []int{5, n}[bi]; len(c.SrcDict) != wantD {
			t.Errorf("block %d: source dictionary of %d, want %d", bi, len(c.SrcDict), wantD)
		}
		if err := s.ReadBlock(&bl[bi], ColSrcAddr|ColSrcAddrIdx|ColDstAddr|ColDstAddrIdx, &both); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if both.SrcAddr[i] != c.SrcDict[c.SrcIdx[i]] || both.DstDict[both.DstIdx[i]] != both.DstAddr[i] ||
				both.DstAddr[i] != c.DstDict[c.DstIdx[i]] {
				t.Fatalf("block %d row %d: rows and dictionary form differ", bi, i)
			}
		}
	}
	allocs := testing.AllocsPerRun(20, func() {
		for i := range bl {
			if err := s.ReadBlock(&bl[i], ColSrcAddrIdx|ColDstAddrIdx, &c); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 && !raceEnabled {
		t.Errorf("%v allocations per ReadBlock pair", allocs)
	}
}
