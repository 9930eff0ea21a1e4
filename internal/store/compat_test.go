package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// Golden blocks written by earlier encoders: testdata/block-v1.bin is
// compatRecs(6, 2), every column raw and the version byte 1 (as version 1
// wrote them); testdata/block-v2.bin is compatRecs(600, 1), with
// compression 2 (both before the drop and sampling columns);
// testdata/block-v3.bin is goldenV3Recs (drops and sampling, before the
// NAT, verdict and conntrack columns); testdata/block-v4.bin is
// goldenV4Recs, written by TestWriteGoldenV4 (every column in use);
// testdata/block-v5.bin is goldenV5Recs (TestWriteGoldenV5: workloads
// and services too); testdata/block-v6.bin is goldenV6Recs
// (TestWriteGoldenV6: and nodes); testdata/block-v7.bin is goldenV7Recs
// (TestWriteGoldenV7: IPv4 sources from a pool of 90, stored as adictd,
// the IPv4 dictionary entries delta-coded); testdata/block-v8.bin is
// goldenV8Recs (TestWriteGoldenV8: byte counts stored per packet);
// testdata/block-v9.bin is goldenV9Recs (TestWriteGoldenV9: an address
// set, the service tuple, reverse packets as a ratio); testdata/block-v10.bin
// is goldenV10Recs (TestWriteGoldenV10: reverse bytes without the rows
// that have no packets; the last 36-byte directory); testdata/block-v11.bin
// is goldenV10Recs again (TestWriteGoldenV11: the varint directory, and
// address-set dictionaries whose classes are the entries' rows, as format
// 11 wrote them before the classes became buckets of rows).
var goldenBlocks = []struct {
	file       string
	version    byte
	n          int
	ncols      int
	recs       func() []flow.Record
	compressed bool
}{
	{"block-v1.bin", 1, 6, numColsV2, func() []flow.Record { return compatRecs(6, 2) }, false},
	{"block-v2.bin", 2, 600, numColsV2, func() []flow.Record { return compatRecs(600, 1) }, true},
	{"block-v3.bin", 3, 400, numColsV3, goldenV3Recs, true},
	{"block-v4.bin", 4, 300, numColsV4, goldenV4Recs, true},
	{"block-v5.bin", 5, 250, numColsV5, goldenV5Recs, true},
	{"block-v6.bin", 6, 260, numCols, goldenV6Recs, true},
	{"block-v7.bin", 7, 260, numCols, goldenV7Recs, true},
	{"block-v8.bin", 8, 260, numCols, goldenV8Recs, true},
	{"block-v9.bin", 9, 260, numCols, goldenV9Recs, true},
	{"block-v10.bin", 10, 260, numCols, goldenV10Recs, true},
	{"block-v11.bin", 11, 260, numCols, goldenV10Recs, true},
}

// goldenV8Recs are the records of block-v8.bin: version 7's, whose byte
// counts are whole multiples of their packets plus a remainder, as
// version 8 stores them (flag 2).
func goldenV8Recs() []flow.Record {
	recs := goldenV7Recs()
	for i := range recs {
		if r := &recs[i]; r.Packets > 1 && i%4 == 0 {
			r.Bytes += uint64(i) % r.Packets
		}
	}
	return recs
}

// TestWriteGoldenV8 writes testdata/block-v8.bin when WEIR_STORE_GOLDEN is
// set (once, when version 8 was current; never overwrite it after).
func TestWriteGoldenV8(t *testing.T) {
	if os.Getenv("WEIR_STORE_GOLDEN") == "" {
		t.Skip("set WEIR_STORE_GOLDEN=1 to write testdata/block-v8.bin")
	}
	b, h := newTestEncoder(t).encode(nil, goldenV8Recs())
	if b[12] != 8 || h.cols[cBytes].flags&flagPerPkt == 0 || h.cols[cRevBytes].flags&flagPerPkt == 0 {
		t.Fatalf("version %d, Bytes flags %d, RevBytes flags %d", b[12], h.cols[cBytes].flags, h.cols[cRevBytes].flags)
	}
	if err := os.WriteFile(filepath.Join("testdata", "block-v8.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// goldenV7Recs are the records of block-v7.bin: version 6's, with the
// IPv4 sources drawn from 90 hosts (seen 1 to 6 times each), so that
// they make a dictionary whose IPv4 entries version 7 delta-codes.
func goldenV7Recs() []flow.Record {
	recs := goldenV6Recs()
	for i := range recs {
		if a := &recs[i].Key.SrcAddr; v4Mapped(a) {
			k := i * 37 % 90
			if i%3 == 0 {
				k = i * 37 % 20
			}
			a[13], a[14], a[15] = byte(k*37), byte(k*11), byte(1+k*53)
		}
	}
	return recs
}

// TestWriteGoldenV7 writes testdata/block-v7.bin when WEIR_STORE_GOLDEN is
// set (once, when version 7 was current; never overwrite it after).
func TestWriteGoldenV7(t *testing.T) {
	if os.Getenv("WEIR_STORE_GOLDEN") == "" {
		t.Skip("set WEIR_STORE_GOLDEN=1 to write testdata/block-v7.bin")
	}
	b, _ := newTestEncoder(t).encode(nil, goldenV7Recs())
	if b[12] != 7 {
		t.Fatalf("version %d", b[12])
	}
	if err := os.WriteFile(filepath.Join("testdata", "block-v7.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenAddrEncodings: the golden blocks before version 7 use the
// address dictionary of old (adict, in the v4 to v6 ones) and never
// adictd; the version 7 one stores its source addresses as adictd, so
// TestOldBlocks reads both forms back.
func TestGoldenAddrEncodings(t *testing.T) {
	adict := 0
	for _, g := range goldenBlocks {
		h, err := parseHeader(readGolden(t, g.file), true)
		if err != nil {
			t.Fatal(g.file, err)
		}
		for id, c := range h.cols[:h.ncols] {
			if h.omit&(1<<uint(id)) == 0 && c.enc == encADictD && g.version < 7 {
				t.Errorf("%s: column %d is adictd", g.file, id)
			}
			if h.omit&(1<<uint(id)) == 0 && c.enc == encADict {
				adict++
			}
		}
		if g.version == 7 && h.cols[cSrcAddr].enc != encADictD {
			t.Errorf("%s: source addresses encoding %d, want adictd", g.file, h.cols[cSrcAddr].enc)
		}
	}
	if adict == 0 {
		t.Error("no golden block has an adict column")
	}
}

// goldenV3Recs are the records of block-v3.bin: every 5th with drops,
// every 3rd sampled 1 in 100.
func goldenV3Recs() []flow.Record {
	recs := withDrops(compatRecs(400, 3), 5, 0)
	for i := range recs {
		if i%3 == 0 {
			recs[i].Sampling = 100
		}
	}
	return recs
}

// goldenV4Recs are the records of block-v4.bin: drops and sampling as in
// version 3, and translated rows (IPv4 and IPv6), deny flows with rules,
// conntrack marks and zones.
func goldenV4Recs() []flow.Record {
	recs := withNAT(withDrops(compatRecs(300, 4), 7, 0), 3)
	for i := range recs {
		if i%11 == 0 {
			recs[i].Sampling = 10
		}
	}
	return recs
}

// TestWriteGoldenV4 writes testdata/block-v4.bin when WEIR_STORE_GOLDEN is
// set (once, when version 4 was current; never overwrite it after).
func TestWriteGoldenV4(t *testing.T) {
	if os.Getenv("WEIR_STORE_GOLDEN") == "" {
		t.Skip("set WEIR_STORE_GOLDEN=1 to write testdata/block-v4.bin")
	}
	b, _ := newTestEncoder(t).encode(nil, goldenV4Recs())
	if b[12] != 4 {
		t.Fatalf("version %d", b[12])
	}
	if err := os.WriteFile(filepath.Join("testdata", "block-v4.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readGolden(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOldBlocks: golden blocks of every version decode to exactly the
// records they were written from, with the columns their version lacks 0
// and ""; in a store they read next to current blocks of the same
// partition, the old blocks' summaries say 0 for the columns they lack,
// and a reader asking only for those columns gets zeros without reading
// the block's columns.
func TestOldBlocks(t *testing.T) {
	dir := tempDir(t)
	part := filepath.Join(dir, escapeIface("x"), "2025-03-01")
	if err := os.MkdirAll(part, 0o755); err != nil {
		t.Fatal(err)
	}
	x := &index{epoch: 1, iface: "x"}
	var data []byte
	var want []flow.Record
	for _, g := range goldenBlocks {
		b := readGolden(t, g.file)
		h, err := parseHeader(b, true)
		if err != nil || b[12] != g.version || h.ncols != g.ncols || h.rows != g.n {
			t.Fatalf("%s: %v, version %d, %d columns, %d rows", g.file, err, b[12], h.ncols, h.rows)
		}
		seg := false
		for _, c := range h.cols[:h.ncols] {
			seg = seg || c.comp == compSeg
		}
		if seg != g.compressed {
			t.Fatalf("%s: compression 2 used: %v", g.file, seg)
		}
		var c Columns
		if err := decodeBlock(b, true, &c); err != nil || c.N != g.n {
			t.Fatalf("%s: %v, %d rows", g.file, err, c.N)
		}
		recs := g.recs()
		for i := range recs {
			if got := rowOf(&c, i); !recEq(got, recs[i]) {
				t.Fatalf("%s row %d:\n got %+v\nwant %+v", g.file, i, got, recs[i])
			}
		}
		x.entries = append(x.entries, indexEntryT{off: int64(len(data)), blockLen: h.blockLen, headerLen: h.headerLen,
			rows: h.rows, minStart: h.minStart, maxEnd: h.maxEnd})
		data = append(data, b...)
		for i := range recs {
			recs[i].Iface = "x"
		}
		want = append(want, recs...)
	}
	x.dataLen = int64(len(data))
	if err := os.WriteFile(filepath.Join(part, dataName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeIndexAt(part, x); err != nil {
		t.Fatal(err)
	}
	// A writer appends a current block with drops and NAT to the same partition.
	s := openT(t, Config{Dir: dir, NoSync: true, TimePrecision: time.Nanosecond})
	more := withNAT(withDrops(mkRecs(50, 1<<40, "x", t0+int64(time.Hour)), 2, 8), 4)
	if err := s.Write(more); err != nil {
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
	if failed != 0 || r.Stats().CorruptBlocks != 0 {
		t.Fatalf("%d blocks failed: %q", failed, r.Stats().Warnings)
	}
	sameRows(t, rows, append(want, more...))
	bl, _ := r.Blocks(0, 0, nil)
	if len(bl) != len(goldenBlocks)+1 {
		t.Fatalf("%d blocks", len(bl))
	}
	var c Columns
	v4cols := ColNATSrcAddr | ColNATDstAddr | ColNATSrcPort | ColNATDstPort | ColVerdict | ColRule | ColMark | ColZone
	for i, b := range bl[:3] {
		for _, col := range []Column{ColNATVersion, ColNATSrcPort, ColNATDstPort, ColVerdict, ColRule, ColMark, ColZone} {
			if lo, hi, ok := b.Range(col); !ok || lo != 0 || hi != 0 {
				t.Errorf("block of version %d: Range(%#x) = %d..%d %v", i+1, col, lo, hi, ok)
			}
		}
		if lo, hi := b.h.span(v4cols); lo != 0 || hi != 0 {
			t.Errorf("block of version %d: reading only absent columns spans %d..%d", i+1, lo, hi)
		}
		if err := r.ReadBlock(&bl[i], v4cols, &c); err != nil {
			t.Fatal(err)
		}
		for j := range c.N {
			if c.NATSrcAddr[j] != ([16]byte{}) || c.NATDstAddr[j] != ([16]byte{}) || c.NATVersion[j] != 0 || c.NATSrcPort[j] != 0 ||
				c.NATDstPort[j] != 0 || c.Verdict[j] != 0 || c.Rule[j] != "" || c.Mark[j] != 0 || c.Zone[j] != 0 {
				t.Fatalf("block of version %d row %d: NAT, verdict or conntrack columns not zero", i+1, j)
			}
		}
		if len(c.NATSrcAddr) != c.N || len(c.Rule) != c.N || len(c.Zone) != c.N || c.N != b.Rows {
			t.Fatalf("block of version %d: %d rows, columns %d %d %d", i+1, c.N, len(c.NATSrcAddr), len(c.Rule), len(c.Zone))
		}
	}
	for i, b := range bl[:5] { // versions 1 to 5 have no node
		if lo, hi, ok := b.Range(ColNode); !ok || lo != 0 || hi != 0 {
			t.Errorf("block of version %d: Range(ColNode) = %d..%d %v", i+1, lo, hi, ok)
		}
		if lo, hi := b.h.span(ColNode); lo != 0 || hi != 0 {
			t.Errorf("block of version %d: reading only the node spans %d..%d", i+1, lo, hi)
		}
		if err := r.ReadBlock(&bl[i], ColNode, &c); err != nil {
			t.Fatal(err)
		}
		if c.N != b.Rows || len(c.Node) != c.N {
			t.Fatalf("block of version %d: %d rows, %d nodes", i+1, c.N, len(c.Node))
		}
		for j := range c.N {
			if c.Node[j] != "" {
				t.Fatalf("block of version %d row %d: node %q", i+1, j, c.Node[j])
			}
		}
	}
	for i, b := range bl[:2] {
		for _, col := range []Column{ColDropPackets, ColDropBytes, ColDropReason, ColSampling} {
			if lo, hi, ok := b.Range(col); !ok || lo != 0 || hi != 0 {
				t.Errorf("old block %d: Range(%#x) = %d..%d %v", i, col, lo, hi, ok)
			}
		}
		if lo, hi := b.h.span(ColDropPackets | ColDropReason | ColSampling); lo != 0 || hi != 0 {
			t.Errorf("old block %d: reading only absent columns spans %d..%d", i, lo, hi)
		}
		if lo, hi := b.h.span(ColPackets | ColDropBytes); lo != int(b.h.cols[cPackets].off) || hi != lo+int(b.h.cols[cPackets].slen) {
			t.Errorf("old block %d: Packets with an absent column spans %d..%d", i, lo, hi)
		}
		if err := r.ReadBlock(&bl[i], ColDropPackets|ColDropBytes|ColDropReason|ColSampling, &c); err != nil {
			t.Fatal(err)
		}
		if c.N != b.Rows || len(c.DropPackets) != c.N || len(c.DropBytes) != c.N || len(c.DropReason) != c.N || len(c.Sampling) != c.N {
			t.Fatalf("old block %d: %d rows, columns %d %d %d %d", i, c.N, len(c.DropPackets), len(c.DropBytes), len(c.DropReason), len(c.Sampling))
		}
		for j := range c.N {
			if c.DropPackets[j] != 0 || c.DropBytes[j] != 0 || c.DropReason[j] != "" || c.Sampling[j] != 0 {
				t.Fatalf("old block %d row %d: drops %d/%d %q sampling %d", i, j, c.DropPackets[j], c.DropBytes[j], c.DropReason[j], c.Sampling[j])
			}
		}
	}
	// A damaged old block is still corrupt, skipped and counted (its last
	// byte is in a column).
	for i := 1; i < len(goldenBlocks); i++ {
		e := x.entries[i]
		data[e.off+int64(e.blockLen)-1] ^= 1
		os.WriteFile(filepath.Join(part, dataName), append(data, readAllData(t, part)[len(data):]...), 0o644)
		r, _ = OpenReadOnly(dir)
		bl, _ = r.Blocks(0, 0, nil)
		if err := r.ReadBlock(&bl[i], ColAll, &c); !errors.Is(err, ErrCorrupt) || r.Stats().CorruptBlocks != 1 {
			t.Errorf("damaged version %d block: %v, %d corrupt", goldenBlocks[i].version, err, r.Stats().CorruptBlocks)
		}
		data[e.off+int64(e.blockLen)-1] ^= 1
	}
}

func readAllData(t *testing.T, part string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(part, dataName))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compatRecs makes n varied records from a fixed arithmetic generator
// (splitmix64: no library generator whose sequence could change), using
// only the fields version 1 and 2 blocks keep.
func compatRecs(n int, seed uint64) []flow.Record {
	x := seed
	next := func(k uint64) uint64 {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return (z ^ z>>31) % k
	}
	recs := make([]flow.Record, n)
	at := int64(1_740_787_200_000_000_000) // 2025-03-01 UTC
	for i := range recs {
		r := &recs[i]
		if next(10) == 0 {
			r.Key.SrcAddr = [16]byte{0x20, 1, 0xd, 0xb8, 15: byte(next(40))}
			r.Key.DstAddr = [16]byte{0x20, 1, 0xd, 0xb8, 14: 1, 15: byte(next(7))}
			r.Key.IPVersion = 6
		} else {
			r.Key.SrcAddr = [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: byte(next(3)), 14: byte(next(20)), 15: byte(1 + next(200))}
			r.Key.DstAddr = [16]byte{10: 0xff, 11: 0xff, 12: 192, 13: 168, 14: 0, 15: byte(1 + next(9))}
			r.Key.IPVersion = 4
		}
		r.Key.Proto = []uint8{6, 6, 6, 17, 1}[next(5)]
		if r.Key.Proto == 1 {
			r.Key.ICMPType, r.Key.ICMPCode = 8, uint8(next(2))
		} else {
			r.Key.SrcPort = uint16(32768 + next(28000))
			r.Key.DstPort = []uint16{443, 443, 80, 53, 22, 8443}[next(6)]
		}
		r.Packets = 1 + next(50)
		r.Bytes = r.Packets * (40 + next(1400))
		r.RevPackets = next(60)
		r.RevBytes = r.RevPackets * (40 + next(1400))
		if r.Key.Proto == 6 {
			r.TCPFlags, r.RevTCPFlags = uint8(0x02|next(256)&0x1d), uint8(0x12|next(256)&0x0d)
		}
		r.EndReason = flow.EndReason(1 + next(3))
		if next(8) == 0 {
			r.VLAN = uint16(100 + next(3))
		}
		at += int64(next(2_000_000)) * 1000
		r.Start = at
		r.End = at + int64(next(5_000_000))*1000
	}
	return recs
}
