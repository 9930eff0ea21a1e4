package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A Kafka message of weir's topic holds rows of this layout back to back;
// its SchemaHeader says how many (docs/fleet.md, "Messages"):
//
//   - "rowbinary/1": one row (the Kafka engine's format; `?format=row`);
//   - "rowbinary/1;rows=N": N rows, 1 ≤ N ≤ MaxMessageRows (`?format=packed`,
//     read by `weir ingest`; ClickHouse 18.16's Kafka engine loses rows of
//     such messages, so it must never read them).
const (
	SchemaHeader = "weir.schema"
	RowSchema    = "rowbinary/1"
	PackedPrefix = "rowbinary/1;rows="
	// MaxMessageRows bounds N in a packed message's header (the sink
	// packs at most 256).
	MaxMessageRows = 1 << 16
)

// Message errors: a message that is not weir's, or whose rows do not add
// up to its header.
var (
	ErrHeader = errors.New("wire: bad weir.schema header")
	ErrRows   = errors.New("wire: rows do not match the header")
)

// AppendSchema appends the SchemaHeader value of a message of rows rows:
// RowSchema for one row when packed is false, else PackedPrefix and rows.
func AppendSchema(b []byte, rows int, packed bool) []byte {
	if !packed {
		return append(b, RowSchema...)
	}
	return strconv.AppendUint(append(b, PackedPrefix...), uint64(rows), 10)
}

// ParseSchema reads a SchemaHeader value: how many rows the message holds.
// Anything but the two forms above, with N in canonical decimal, is
// ErrHeader.
func ParseSchema(v []byte) (int, error) {
	if string(v) == RowSchema {
		return 1, nil
	}
	s, ok := strings.CutPrefix(string(v), PackedPrefix)
	n, err := strconv.Atoi(s)
	if !ok || err != nil || n < 1 || n > MaxMessageRows || strconv.Itoa(n) != s {
		return 0, fmt.Errorf("%w %q: want %q or %q with 1 to %d", ErrHeader, clean(v), RowSchema, PackedPrefix+"N", MaxMessageRows)
	}
	return n, nil
}

// clean shows at most 64 bytes of outside text, printable ASCII only.
func clean(v []byte) string {
	b := make([]byte, 0, min(len(v), 64))
	for _, c := range v[:min(len(v), 64)] {
		if c < 0x20 || c > 0x7e {
			c = '?'
		}
		b = append(b, c)
	}
	return string(b)
}

// rowSpec is a row's layout for RowLen: a positive entry is a run of
// fixed-width bytes, a negative one a String of at most -entry bytes.
// It is made from Columns, so it cannot drift from them.
var rowSpec = func() (spec []int) {
	width := map[string]int{"UInt8": 1, "UInt16": 2, "UInt32": 4, "UInt64": 8, "Int64": 8, "FixedString(16)": 16}
	for _, c := range Columns {
		if c.Type == "String" {
			max := MaxString
			if c.Name == "drop_reason" || c.Name == "rule" {
				max = MaxShortString
			}
			spec = append(spec, -max)
			continue
		}
		w, ok := width[c.Type]
		if !ok {
			panic("wire: no width for " + c.Type)
		}
		if n := len(spec); n > 0 && spec[n-1] > 0 { // merge fixed runs
			spec[n-1] += w
		} else {
			spec = append(spec, w)
		}
	}
	return spec
}()

// RowLen is the length of the row at the start of b, checked as Decode
// checks it (the version, every field present, strings within their
// bounds) without decoding or allocating: what a consumer that passes rows
// on whole needs.
func RowLen(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, ErrShort
	}
	if b[0] != Version {
		return 0, fmt.Errorf("%w %d (this weir reads %d)", ErrVersion, b[0], Version)
	}
	off := 0
	for _, w := range rowSpec {
		if w > 0 {
			off += w
			if off > len(b) {
				return 0, ErrShort
			}
			continue
		}
		n, k := binary.Uvarint(b[off:])
		switch {
		case k <= 0:
			return 0, ErrShort
		case n > uint64(-w):
			return 0, ErrString
		}
		off += k + int(n)
		if off > len(b) {
			return 0, ErrShort
		}
	}
	return off, nil
}

// CheckRows checks that b is exactly rows whole rows: nil, or an error
// wrapping ErrShort, ErrVersion, ErrString (a bad row) or ErrRows (fewer
// or more rows than the header names).
func CheckRows(b []byte, rows int) error {
	n := 0
	for len(b) > 0 {
		if n == rows {
			return fmt.Errorf("%w: %d bytes after the %d rows the header names", ErrRows, len(b), rows)
		}
		l, err := RowLen(b)
		if err != nil {
			return fmt.Errorf("row %d: %w", n, err)
		}
		b = b[l:]
		n++
	}
	if n != rows {
		return fmt.Errorf("%w: %d rows, the header names %d", ErrRows, n, rows)
	}
	return nil
}
