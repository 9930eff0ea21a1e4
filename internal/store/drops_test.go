package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// dropReasons are kernel drop reason names as the eBPF source reports them.
var dropReasons = []string{"NO_SOCKET", "NETFILTER_DROP", "TCP_INVALID_SEQUENCE", "SUBSYSTEM", "QDISC_DROP", "NOT_SPECIFIED"}

// withDrops gives every every-th record of recs drops (with a reason) and
// all of them sampling rate sampling.
func withDrops(recs []flow.Record, every int, sampling uint32) []flow.Record {
	for i := range recs {
		recs[i].Sampling = sampling
		if every > 0 && i%every == 0 {
			recs[i].DropPackets = uint64(1 + i%5)
			recs[i].DropBytes = recs[i].DropPackets * uint64(60+i%1400)
			recs[i].DropReason = dropReasons[(i/every)%len(dropReasons)]
		}
	}
	return recs
}

// TestDropsRoundTrip: blocks with and without drops, sampling and drop
// reasons decode to exactly the records written; columns without them are
// left out (version 4: no directory entry, no bytes); the reason column's
// min and max are its string lengths.
func TestDropsRoundTrip(t *testing.T) {
	e := newTestEncoder(t)
	r := rand.New(rand.NewPCG(21, 22))
	const n = 3000
	t.Run("none", func(t *testing.T) {
		h := roundTrip(t, e, baseRecs(n))
		for _, id := range []int{cDropPackets, cDropBytes, cDropReason, cSampling} {
			if c := h.cols[id]; h.omit&(1<<id) == 0 || c != (colMeta{}) {
				t.Errorf("col %d: %+v, want it left out", id, c)
			}
		}
	})
	t.Run("sampled, sparse drops", func(t *testing.T) {
		h := roundTrip(t, e, withDrops(baseRecs(n), 37, 100))
		if c := h.cols[cSampling]; c.enc != encConst || c.min != 100 || c.max != 100 {
			t.Errorf("sampling: %+v, want const 100", c)
		}
		if c := h.cols[cDropReason]; c.enc != encSDict || c.min != 0 || c.max != uint64(len("TCP_INVALID_SEQUENCE")) {
			t.Errorf("reason: enc %d lengths %d..%d", c.enc, c.min, c.max)
		}
		if c := h.cols[cDropPackets]; c.min != 0 || c.max != 5 {
			t.Errorf("drop packets range %d..%d", c.min, c.max)
		}
		if c := h.cols[cDropReason]; c.comp != compSeg || c.slen > c.rlen/4 {
			t.Errorf("reason: compression %d, %d of %d bytes; want the index plane entropy-coded", c.comp, c.slen, c.rlen)
		}
	})
	t.Run("every row drops", func(t *testing.T) {
		recs := withDrops(baseRecs(n), 1, 1)
		for i := range recs {
			recs[i].DropReason = dropReasons[0] // constant and not empty
		}
		h := roundTrip(t, e, recs)
		if c := h.cols[cDropReason]; c.rlen != 6+9 || c.min != 9 || c.max != 9 {
			t.Errorf("constant reason: rlen %d lengths %d..%d", c.rlen, c.min, c.max)
		}
	})
	t.Run("extremes and many reasons", func(t *testing.T) {
		recs := baseRecs(n)
		for i := range recs {
			recs[i].DropPackets = []uint64{0, math.MaxUint64, r.Uint64()}[i%3]
			recs[i].DropBytes = r.Uint64()
			recs[i].Sampling = []uint32{0, 1, math.MaxUint32, r.Uint32()}[i%4]
			// 700 distinct names (2-byte indexes), empty, 64 bytes, any bytes.
			recs[i].DropReason = fmt.Sprintf("R%d_%s", r.IntN(700), strings.Repeat("x", i%40))
			switch i % 50 {
			case 1:
				recs[i].DropReason = ""
			case 2:
				recs[i].DropReason = strings.Repeat("Z", maxStrLen)
			case 3:
				recs[i].DropReason = "\x00\xff\n\"é"
			}
		}
		h := roundTrip(t, e, recs)
		c := h.cols[cDropReason]
		if st := e.stream; c.enc != encSDict || c.min != 0 || c.max != maxStrLen {
			t.Errorf("reason: enc %d lengths %d..%d (%d bytes)", c.enc, c.min, c.max, len(st))
		}
		if e.cut != 0 {
			t.Errorf("%d strings cut, none is over %d bytes", e.cut, maxStrLen)
		}
	})
	t.Run("distinct long reasons", func(t *testing.T) {
		recs := baseRecs(300) // 69 raw bytes a row, over the 32 of numbers
		for i := range recs {
			recs[i].DropReason = fmt.Sprintf("%064d", i)
		}
		h := roundTrip(t, e, recs)
		if c := h.cols[cDropReason]; c.rlen != 5+300*(1+64+2) {
			t.Errorf("reason stream of %d bytes", c.rlen)
		}
	})
	t.Run("zero and one row", func(t *testing.T) {
		roundTrip(t, e, withDrops(baseRecs(1), 1, 7))
		h := roundTrip(t, e, nil)
		if h.omit != 1<<numCols-1<<firstSparse {
			t.Errorf("no rows: omitted %#x, want every sparse column", h.omit)
		}
	})
}

// TestDropReasonCut: a reason longer than maxStrLen is stored cut to at
// most maxStrLen bytes at a rune start, counted, and reported as a Store
// warning; everything else in the row stays exact.
func TestDropReasonCut(t *testing.T) {
	long := strings.Repeat("A", 100)
	uni := "X" + strings.Repeat("é", 40) // 81 bytes: byte 64 is inside a rune
	for _, c := range []struct {
		in, want string
	}{{long, long[:maxStrLen]}, {uni, uni[:maxStrLen-1]}, {long[:maxStrLen], long[:maxStrLen]}} {
		got, cut := clip(c.in, maxStrLen)
		if got != c.want || cut != (len(c.in) > maxStrLen) {
			t.Errorf("clip(%d bytes) = %d bytes %v, want %d", len(c.in), len(got), cut, len(c.want))
		}
	}
	s := openT(t, Config{NoSync: true, TimePrecision: time.Nanosecond})
	defer s.Close()
	recs := withDrops(mkRecs(10, 0, "eth0", t0), 1, 0)
	recs[3].DropReason, recs[4].DropReason, recs[5].DropReason = long, long, uni // a run of two, then another
	if err := s.Write(recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	rows, _ := readAll(t, s)
	recs[3].DropReason, recs[4].DropReason, recs[5].DropReason = long[:maxStrLen], long[:maxStrLen], uni[:maxStrLen-1]
	sameRows(t, rows, recs)
	if w := s.Stats().Warnings; len(w) != 1 || !strings.Contains(w[0], "3 drop reasons longer than 64 bytes were cut") {
		t.Errorf("warnings %q", w)
	}
}

// TestDropsStore: records with and without drops, through a Store, read
// back exactly; the block summaries give the drop columns' ranges; reading
// them in steady state does not allocate.
func TestDropsStore(t *testing.T) {
	s := openT(t, Config{NoSync: true, TimePrecision: time.Nanosecond})
	defer s.Close()
	plain := mkRecs(500, 0, "eth0", t0)
	drops := withDrops(mkRecs(500, 1000, "eth1", t0), 3, 64)
	for _, b := range [][]flow.Record{plain, drops} {
		if err := s.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	rows, failed := readAll(t, s)
	if failed != 0 {
		t.Fatalf("%d blocks failed", failed)
	}
	sameRows(t, rows, append(append([]flow.Record(nil), plain...), drops...))
	bl, _ := s.Blocks(0, 0, nil)
	if len(bl) != 2 {
		t.Fatalf("%d blocks", len(bl))
	}
	var maxBytes uint64
	for _, r := range drops {
		maxBytes = max(maxBytes, r.DropBytes)
	}
	for _, c := range []struct {
		col    Column
		lo, hi [2]uint64 // eth0, eth1
	}{
		{ColDropPackets, [2]uint64{0, 0}, [2]uint64{0, 5}},
		{ColDropBytes, [2]uint64{0, 0}, [2]uint64{0, maxBytes}},
		{ColDropReason, [2]uint64{0, 0}, [2]uint64{0, 20}},
		{ColSampling, [2]uint64{0, 64}, [2]uint64{0, 64}},
	} {
		for i, b := range bl {
			lo, hi, ok := b.Range(c.col)
			if !ok || lo != c.lo[i] || hi != c.hi[i] {
				t.Errorf("%s: Range(%#x) = %d..%d %v, want %d..%d", b.Iface, c.col, lo, hi, ok, c.lo[i], c.hi[i])
			}
		}
	}
	var cols Columns
	want := ColDropPackets | ColDropBytes | ColDropReason | ColSampling
	if err := s.ReadBlock(&bl[1], want, &cols); err != nil {
		t.Fatal(err)
	}
	if len(cols.Packets) != 0 || len(cols.DropReason) != 500 || len(cols.Sampling) != 500 {
		t.Fatalf("asked only the drop columns: %d packets, %d reasons, %d samplings", len(cols.Packets), len(cols.DropReason), len(cols.Sampling))
	}
	allocs := testing.AllocsPerRun(20, func() {
		for i := range bl {
			if err := s.ReadBlock(&bl[i], want, &cols); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 && !raceEnabled {
		t.Errorf("%v allocations per pair of reads", allocs)
	}
}

// TestFormatV3: a small block laid out byte by byte as FORMAT in doc.go
// says: header fields (version 6: the omitted bitmap names the NAT,
// verdict, conntrack, enrichment and node columns, unused here), the directory entries of
// the version 3 columns and their streams (const, sdict).
func TestFormatV3(t *testing.T) {
	e := newTestEncoder(t)
	recs := baseRecs(3)
	recs[1].DropPackets, recs[1].DropBytes, recs[1].DropReason = 2, 120, "NO_SOCKET"
	recs[2].DropPackets, recs[2].DropBytes, recs[2].DropReason = 2, 120, "NO_SOCKET"
	// Two entries, by frequency: "NO_SOCKET" (twice: index 0), then "".
	for i := range recs {
		recs[i].Sampling = 10
	}
	b, _ := e.encode(nil, recs)
	le := binary.LittleEndian
	if string(b[0:4]) != "WBK1" || int(le.Uint32(b[4:])) != len(b) || b[12] != blockVersion || b[13] != 42 || le.Uint16(b[14:]) != 1<<10-1 ||
		le.Uint32(b[16:]) != 3 || le.Uint32(b[20:]) != 1<<32-1<<22 {
		t.Fatalf("fixed header % x", b[:24])
	}
	hl := int(le.Uint32(b[8:]))
	if crc32.Checksum(b[:hl-4], castagnoli) != le.Uint32(b[hl-4:]) {
		t.Fatal("header CRC")
	}
	pos, ent := walkDirV11(t, b)
	stream := func(id int) (enc, comp byte, st []byte, lo, hi uint64) {
		c := ent[id]
		st = b[c.off : c.off+c.slen]
		if c.rlen != c.slen || c.ck != crc32.Checksum(st, castagnoli) || c.flags != 0 {
			t.Fatalf("column %d: directory % x", id, b[pos[id]:pos[id]+16])
		}
		return c.enc, c.comp, st, c.min, c.max
	}
	u64 := func(v uint64) []byte { return le.AppendUint64(nil, v) }
	for _, c := range []struct {
		id     int
		enc    byte
		st     []byte
		lo, hi uint64
	}{
		// for: width 1, scale 1, base 0, one byte plane (too narrow for dict)
		{18, encFOR, append(append(append([]byte{1}, u64(1)...), u64(0)...), 0, 2, 2), 0, 2},
		{19, encFOR, append(append(append([]byte{1}, u64(1)...), u64(0)...), 0, 120, 120), 0, 120},
		{20, encSDict, []byte{2, 0, 0, 0, 1, 9, 'N', 'O', '_', 'S', 'O', 'C', 'K', 'E', 'T', 0, 1, 0, 0}, 0, 9},
		{21, encConst, u64(10), 10, 10},
	} {
		enc, comp, st, lo, hi := stream(c.id)
		if enc != c.enc || comp != compRaw || !bytes.Equal(st, c.st) || lo != c.lo || hi != c.hi {
			t.Errorf("column %d: enc %d comp %d % x [%d,%d]; want enc %d % x [%d,%d]", c.id, enc, comp, st, lo, hi, c.enc, c.st, c.lo, c.hi)
		}
	}
}

// TestStringStreamErrors: malformed sdict streams are errors (never a
// panic, never an allocation sized by a hostile count).
func TestStringStreamErrors(t *testing.T) {
	var d strDecoder
	good := []byte{2, 0, 0, 0, 1, 1, 'a', 0, 0, 1, 0}
	if got, err := d.decodeStrs(encSDict, good, 3, nil); err != nil || strings.Join(got, ",") != "a,,a" {
		t.Fatalf("good stream: %q %v", got, err)
	}
	long := append([]byte{1, 0, 0, 0, 0, 65}, strings.Repeat("x", 65)...)
	for name, c := range map[string]struct {
		enc uint8
		st  []byte
		n   int
	}{
		"short":            {encSDict, good[:4], 3},
		"wrong encoding":   {encDict, good, 3},
		"index width 5":    {encSDict, []byte{1, 0, 0, 0, 5, 0}, 0},
		"size over rows":   {encSDict, good, 1},
		"huge size":        {encSDict, []byte{0xff, 0xff, 0xff, 0xff, 1, 0}, 1 << 20},
		"no entries":       {encSDict, []byte{0, 0, 0, 0, 0}, 3},
		"entries, no rows": {encSDict, []byte{1, 0, 0, 0, 0, 0}, 0},
		"entry too long":   {encSDict, long, 1},
		"entry past end":   {encSDict, []byte{1, 0, 0, 0, 0, 9, 'a'}, 1},
		"index past dict":  {encSDict, []byte{2, 0, 0, 0, 1, 1, 'a', 0, 0, 2, 0}, 3},
		"missing index":    {encSDict, good[:len(good)-1], 3},
		"trailing byte":    {encSDict, append(good[:len(good):len(good)], 0), 3},
		"width 0, 2 items": {encSDict, []byte{2, 0, 0, 0, 0, 0, 0}, 2},
	} {
		if _, err := d.decodeStrs(c.enc, c.st, c.n, nil); !errors.Is(err, errBadStream) {
			t.Errorf("%s: %v, want errBadStream", name, err)
		}
	}
	// A size the stream cannot hold is refused before anything is sized by it.
	var fresh strDecoder
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := fresh.decodeStrs(encSDict, []byte{0, 0, 0x10, 0, 3, 0}, 1<<20, nil)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errBadStream) || after.TotalAlloc-before.TotalAlloc > 1<<20 {
		t.Errorf("size 1M in a 6-byte stream: %v, %d bytes allocated", err, after.TotalAlloc-before.TotalAlloc)
	}
}

// FuzzStrings: arbitrary bytes never panic the string decoder, and any
// reasons (cut by \x00 from the input) round-trip, cut to maxStrLen.
func FuzzStrings(f *testing.F) {
	var t0 strTable
	st, _, _, _ := t0.encodeStrs(nil, withDrops(baseRecs(40), 3, 0))
	f.Add(st, uint16(40))
	f.Add([]byte("NO_SOCKET\x00\x00NETFILTER_DROP\x00NO_SOCKET"), uint16(1))
	f.Add([]byte{1, 0, 0, 0, 0, 0}, uint16(7))
	f.Fuzz(func(t *testing.T, data []byte, n uint16) {
		var d strDecoder
		_, _ = d.decodeStrs(encSDict, data, int(n), nil)
		parts := strings.Split(string(data), "\x00")
		recs := make([]flow.Record, len(parts))
		for i, p := range parts {
			recs[i].DropReason = p
		}
		var tab strTable
		st, lo, hi, _ := tab.encodeStrs(nil, recs)
		got, err := d.decodeStrs(encSDict, st, len(recs), nil)
		if err != nil {
			t.Fatalf("own stream: %v", err)
		}
		for i, p := range parts {
			want, _ := clip(p, maxStrLen)
			if got[i] != want || uint64(len(want)) < lo || uint64(len(want)) > hi {
				t.Fatalf("row %d: %q, want %q (lengths %d..%d)", i, got[i], want, lo, hi)
			}
		}
	})
}
