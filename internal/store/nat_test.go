package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// denyRules are NFLOG log prefixes as the deny-flow source reports them.
var denyRules = []string{"weir-deny", "fw-drop-in", "k8s-netpol"}

// withNAT translates every every-th record of recs (SNAT to a public
// address and port, DNAT to a backend; IPv6 records to IPv6 addresses),
// makes every (every+1)-th a deny flow with a rule, and gives every
// (every+2)-th a conntrack mark and zone.
func withNAT(recs []flow.Record, every int) []flow.Record {
	for i := range recs {
		r := &recs[i]
		if i%every == 0 {
			p := r.Key
			if r.Key.IPVersion == 6 {
				p.SrcAddr = [16]byte{0x20, 1, 0xd, 0xb8, 0xff, 15: byte(1 + i%3)}
				p.DstAddr = [16]byte{0xfd, 0, 14: byte(i >> 8), 15: byte(i)}
			} else {
				p.SrcAddr = v4(203, 0, 113, byte(1+i%3))
				p.DstAddr = v4(10, 244, byte(i%4), byte(2+i%50))
			}
			p.SrcPort, p.DstPort = uint16(1024+i), 8080+uint16(i%3)
			r.PostNAT = p
		}
		if i%(every+1) == 0 {
			r.Verdict, r.Rule = flow.VerdictDeny, denyRules[i/(every+1)%len(denyRules)]
		}
		if i%(every+2) == 0 {
			r.Mark, r.Zone = uint32(0x1000+i%7), uint16(1+i%3)
		}
	}
	return recs
}

// v4Cols are the column ids new in version 4.
var v4Cols = []int{cNATSrcAddr, cNATDstAddr, cNATVersion, cNATSrcPort, cNATDstPort, cVerdict, cRule, cMark, cZone}

// TestNATRoundTrip: blocks with translated rows (IPv4 and IPv6), deny
// verdicts and rules, marks and zones decode to exactly the records
// written, one field at a time and all together; a block using none of
// them leaves their columns out; ranges summarise the numeric columns.
func TestNATRoundTrip(t *testing.T) {
	e := newTestEncoder(t)
	const n = 3000
	t.Run("none", func(t *testing.T) {
		h := roundTrip(t, e, newGen(3).window(nil, n, t0, "x"))
		for _, id := range v4Cols {
			if h.omit&(1<<id) == 0 {
				t.Errorf("col %d stored, want it left out", id)
			}
		}
	})
	t.Run("all", func(t *testing.T) {
		recs := withNAT(newGen(4).window(nil, n, t0, "x"), 5)
		h := roundTrip(t, e, recs)
		if h.omit>>cNATSrcAddr&(1<<(numColsV4-cNATSrcAddr)-1) != 0 {
			t.Errorf("omitted %#x with every NAT, verdict and conntrack column in use", h.omit)
		}
		if c := h.cols[cNATVersion]; c.min != 0 || c.max != 6 {
			t.Errorf("NAT version range %d..%d", c.min, c.max)
		}
		if c := h.cols[cVerdict]; c.min != 0 || c.max != uint64(flow.VerdictDeny) {
			t.Errorf("verdict range %d..%d", c.min, c.max)
		}
		if c := h.cols[cRule]; c.enc != encSDict || c.min != 0 || c.max != uint64(len("fw-drop-in")) {
			t.Errorf("rule: enc %d lengths %d..%d", c.enc, c.min, c.max)
		}
		if c := h.cols[cNATDstPort]; c.min != 0 || c.max != 8082 {
			t.Errorf("NAT dst port range %d..%d", c.min, c.max)
		}
		if c := h.cols[cZone]; c.min != 0 || c.max != 3 {
			t.Errorf("zone range %d..%d", c.min, c.max)
		}
	})
	// Each field alone: only its columns are stored.
	for _, c := range []struct {
		name string
		set  func(r *flow.Record, i int)
		ids  []int
	}{
		{"dnat only", func(r *flow.Record, i int) {
			r.PostNAT = r.Key
			r.PostNAT.DstAddr = v4(10, 0, 0, byte(i%5))
		}, []int{cNATSrcAddr, cNATDstAddr, cNATVersion, cNATSrcPort, cNATDstPort}},
		{"verdict", func(r *flow.Record, i int) { r.Verdict = flow.VerdictDeny }, []int{cVerdict}},
		{"rule", func(r *flow.Record, i int) { r.Rule = "x" }, []int{cRule}},
		{"mark", func(r *flow.Record, i int) { r.Mark = math.MaxUint32 }, []int{cMark}},
		{"zone", func(r *flow.Record, i int) { r.Zone = math.MaxUint16 }, []int{cZone}},
	} {
		t.Run(c.name, func(t *testing.T) {
			recs := baseRecs(200)
			for i := range recs {
				if i%2 == 1 {
					c.set(&recs[i], i)
				}
			}
			h := roundTrip(t, e, recs)
			for _, id := range v4Cols {
				want := true
				for _, s := range c.ids {
					want = want && s != id
				}
				if got := h.omit&(1<<id) != 0; got != want {
					t.Errorf("col %d omitted %v, want %v", id, got, want)
				}
			}
		})
	}
	t.Run("extremes", func(t *testing.T) {
		recs := baseRecs(500)
		for i := range recs {
			r := &recs[i]
			r.PostNAT = r.Key
			r.PostNAT.SrcPort, r.PostNAT.DstPort = []uint16{0, 65535, uint16(i)}[i%3], []uint16{65535, 0, uint16(7 * i)}[i%3]
			r.PostNAT.DstAddr = [16]byte{0xfe, 0x80, 15: byte(i)} // an IPv6 address in an IPv4 flow's key: stored as given
			r.PostNAT.IPVersion = []uint8{4, 6, 0}[i%3]
			if r.PostNAT.IPVersion == 0 { // as rowOf: protocol and ICMP only in a translated key
				r.PostNAT.Proto = 0
			}
			r.Mark, r.Zone = []uint32{0, math.MaxUint32, uint32(i) * 2654435761}[i%3], uint16(i*97)
			r.Rule = strings.Repeat("r", i%(maxStrLen+1))
		}
		roundTrip(t, e, recs)
	})
}

// TestRuleCut: a rule longer than 64 bytes is stored cut, and the store
// warns, as for drop reasons.
func TestRuleCut(t *testing.T) {
	s := openT(t, Config{Dir: tempDir(t), NoSync: true})
	recs := mkRecs(5, 1, "x", t0)
	for i := range recs[:2] {
		recs[i].Verdict, recs[i].Rule = flow.VerdictDeny, strings.Repeat("p", 70+i)
	}
	if err := s.Write(recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if w := s.Stats().Warnings; len(w) != 1 || !strings.Contains(w[0], "2 rules longer than 64 bytes were cut") {
		t.Errorf("warnings %q", w)
	}
	rows, _ := readAll(t, s)
	for _, r := range rows {
		if r.Verdict == flow.VerdictDeny && r.Rule != strings.Repeat("p", maxStrLen) {
			t.Errorf("rule %q", r.Rule)
		}
	}
}

// TestNATStore: records with NAT, verdicts, rules, marks and zones go
// through a Store (sorted, times rounded) and come back exactly; a
// reader asking for one NAT address column gets it with NATVersion and
// reads no other column's bytes; blocks without NAT say so by range.
func TestNATStore(t *testing.T) {
	s := openT(t, Config{Dir: tempDir(t), NoSync: true, TimePrecision: time.Nanosecond, Writeout: time.Hour})
	with := withNAT(newGen(5).window(nil, 2000, t0, "eth0"), 3)
	without := newGen(6).window(nil, 1000, t0+int64(24*time.Hour), "eth0")
	for _, recs := range [][]flow.Record{with, without} {
		if err := s.Write(recs); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	rows, failed := readAll(t, s)
	if failed != 0 {
		t.Fatalf("%d blocks failed", failed)
	}
	sameRecs(t, rows, append(append([]flow.Record(nil), with...), without...))
	bl, err := s.Blocks(0, 0, nil)
	if err != nil || len(bl) != 2 {
		t.Fatalf("%d blocks, %v", len(bl), err)
	}
	if _, hi, _ := bl[0].Range(ColNATVersion); hi != 6 {
		t.Errorf("block with NAT: version range up to %d", hi)
	}
	if _, hi, _ := bl[1].Range(ColNATVersion); hi != 0 {
		t.Errorf("block without NAT: version range up to %d", hi)
	}
	h := bl[0].h
	lo, hi := h.span(ColNATDstAddr)
	a, v := h.cols[cNATDstAddr], h.cols[cNATVersion]
	if lo != int(min(a.off, v.off)) || hi != int(max(a.off+a.slen, v.off+v.slen)) {
		t.Errorf("NAT dst address spans %d..%d, columns at %d+%d and %d+%d", lo, hi, a.off, a.slen, v.off, v.slen)
	}
	var c Columns
	if err := s.ReadBlock(&bl[0], ColNATDstAddr, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.NATDstAddr) != c.N || len(c.NATVersion) != c.N || len(c.NATSrcAddr) != 0 || len(c.Packets) != 0 {
		t.Fatalf("ColNATDstAddr filled %d %d %d %d of %d", len(c.NATDstAddr), len(c.NATVersion), len(c.NATSrcAddr), len(c.Packets), c.N)
	}
	nated := 0
	for i := range c.N {
		if c.NATVersion[i] != 0 {
			nated++
		} else if c.NATDstAddr[i] != ([16]byte{}) {
			t.Fatalf("row %d not translated but has NAT address %x", i, c.NATDstAddr[i])
		}
	}
	if want := (2000 + 2) / 3; nated != want {
		t.Errorf("%d translated rows, want %d", nated, want)
	}
}

// TestFormatV4: the omitted bitmap sits where versions 1-3 had a reserved
// 0, and the directory holds only the columns stored, in id order: with
// only Zone in use of the sparse columns, Zone's const entry follows
// End's.
func TestFormatV4(t *testing.T) {
	e := newTestEncoder(t)
	recs := baseRecs(3)
	for i := range recs {
		recs[i].Zone = 7
	}
	b, _ := e.encode(nil, recs)
	le := binary.LittleEndian
	want := uint64((1<<numCols - 1<<firstSparse) &^ (1 << cZone))
	if b[12] != blockVersion || b[13] != numCols || le.Uint32(b[20:]) != uint32(want) || le.Uint16(b[14:]) != uint16(want>>32) {
		t.Fatalf("fixed header % x, want omitted %#x", b[:24], want)
	}
	pos, ent := walkDirV11(t, b)
	z, after := ent[cZone], len(pos) == firstSparse+1 // End's entry, then Zone's alone
	for id := range pos {
		after = after && (id < firstSparse || id == cZone)
	}
	if !after || z.enc != encConst || z.slen != 8 || !bytes.Equal(b[z.off:z.off+z.slen], le.AppendUint64(nil, 7)) || z.min != 7 || z.max != 7 {
		t.Fatalf("entry after End: % x", b[pos[cZone]:pos[cZone]+16])
	}
	var c Columns
	if err := decodeBlock(b, true, &c); err != nil || c.Zone[2] != 7 || c.Mark[2] != 0 || c.NATVersion[0] != 0 {
		t.Fatalf("decode: %v", err)
	}
	// A corrupt stream in a NAT column is an error, never a panic.
	recs = withNAT(baseRecs(50), 2)
	b, h := e.encode(nil, recs)
	a := h.cols[cNATSrcAddr]
	b[a.off] ^= 0xff
	if err := decodeBlock(b, true, &c); !errors.Is(err, errCorruptBlock) {
		t.Errorf("damaged NAT column: %v", err)
	}
}

// sameRecs is sameRows for records that tie on sameRows' order (the
// generator's): both sides sorted by their every field.
func sameRecs(t *testing.T, got, want []flow.Record) {
	t.Helper()
	key := func(r flow.Record) string { return fmt.Sprintf("%+v", flat(r)) }
	sortBy := func(rs []flow.Record) []flow.Record {
		rs = slices.Clone(rs)
		slices.SortFunc(rs, func(a, b flow.Record) int { return strings.Compare(key(a), key(b)) })
		return rs
	}
	got, want = sortBy(got), sortBy(want)
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i := range got {
		if !recEq(got[i], want[i]) {
			t.Fatalf("row %d:\n got %+v\nwant %+v", i, flat(got[i]), flat(want[i]))
		}
	}
}
