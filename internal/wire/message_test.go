package wire

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// TestRowLen: RowLen agrees with Decode on every row length, and rejects
// every cut of a row as Decode does.
func TestRowLen(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		rec := randRecord(r)
		b := Append(nil, &rec)
		n, err := RowLen(append(b, 1, 2, 3))
		if err != nil || n != len(b) {
			t.Fatalf("RowLen = %d, %v; want %d", n, err, len(b))
		}
		for cut := range len(b) {
			if _, err := RowLen(b[:cut]); err == nil {
				t.Fatalf("a row cut to %d of %d bytes passed", cut, len(b))
			}
		}
	}
	if _, err := RowLen([]byte{2, 0, 0}); !errors.Is(err, ErrVersion) {
		t.Errorf("version 2: %v", err)
	}
}

// TestSchema: the two header forms round-trip, and near misses are refused.
func TestSchema(t *testing.T) {
	for _, c := range []struct {
		rows   int
		packed bool
	}{{1, false}, {1, true}, {256, true}, {MaxMessageRows, true}} {
		v := AppendSchema(nil, c.rows, c.packed)
		if n, err := ParseSchema(v); err != nil || n != c.rows {
			t.Errorf("%q: %d, %v", v, n, err)
		}
	}
	for _, v := range []string{"", "rowbinary/2", "rowbinary/1;rows=", "rowbinary/1;rows=0", "rowbinary/1;rows=01",
		"rowbinary/1;rows=-1", "rowbinary/1;rows=65537", "rowbinary/1;rows=1 ", "rowbinary/1;rows=+3", "RowBinary/1"} {
		if _, err := ParseSchema([]byte(v)); !errors.Is(err, ErrHeader) {
			t.Errorf("%q: %v, want ErrHeader", v, err)
		}
	}
}

// TestCheckRows: a message of N rows passes with N, and fails with any
// other count, with bytes cut off, or with bytes added.
func TestCheckRows(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var msg []byte
	for range 5 {
		rec := randRecord(r)
		msg = Append(msg, &rec)
	}
	if err := CheckRows(msg, 5); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 4, 6} {
		if err := CheckRows(msg, n); !errors.Is(err, ErrRows) {
			t.Errorf("5 rows checked as %d: %v", n, err)
		}
	}
	if err := CheckRows(msg[:len(msg)-1], 5); !errors.Is(err, ErrShort) {
		t.Errorf("cut: %v", err)
	}
	if err := CheckRows(append(msg, 1), 5); !errors.Is(err, ErrRows) {
		t.Errorf("extra byte: %v", err)
	}
	if err := CheckRows(nil, 1); !errors.Is(err, ErrRows) {
		t.Errorf("empty: %v", err)
	}
}

// FuzzMessage: any header and value either fail CheckRows or are exactly
// the header's count of rows that Decode reads whole, back to back.
func FuzzMessage(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	var two []byte
	for range 2 {
		rec := randRecord(r)
		two = Append(two, &rec)
	}
	f.Add([]byte(RowSchema), two[:len(two)/2])
	f.Add([]byte("rowbinary/1;rows=2"), two)
	f.Add([]byte("rowbinary/1;rows=3"), two)
	f.Add([]byte("rowbinary/1;rows=1"), []byte{1})
	f.Fuzz(func(t *testing.T, hdr, val []byte) {
		n, err := ParseSchema(hdr)
		if err != nil {
			return
		}
		if err := CheckRows(val, n); err != nil {
			return
		}
		var rec flow.Record
		b := val
		for i := range n {
			rest, err := Decode(b, &rec)
			if err != nil {
				t.Fatalf("row %d of %d passed CheckRows but does not decode: %v", i, n, err)
			}
			if l, _ := RowLen(b); l != len(b)-len(rest) {
				t.Fatalf("row %d: RowLen %d, Decode read %d", i, l, len(b)-len(rest))
			}
			b = rest
		}
		if len(b) != 0 {
			t.Fatalf("%d bytes left after %d rows", len(b), n)
		}
	})
}
