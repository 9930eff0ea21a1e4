package clickhouse

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/testfleet"
)

// TestClickHouse runs weir's SQL on each server: Setup twice (idempotent),
// the quoting of hostile strings, and the query equivalence with the
// embedded store (equiv_test.go).
func TestClickHouse(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.name, func(t *testing.T) {
			t.Run("setup", func(t *testing.T) { testSetup(t, srv.conn) })
			t.Run("quote", func(t *testing.T) { testQuote(t, srv.conn) })
			t.Run("offsets", func(t *testing.T) { testOffsets(t, srv.conn) })
			t.Run("equivalence", func(t *testing.T) { testEquivalence(t, srv.conn) })
		})
	}
}

// testSetup: Setup creates every table and view, a second Setup changes
// nothing and succeeds, and a flows table of another layout is refused.
func testSetup(t *testing.T, c Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, other := testfleet.Unique("weir_setup"), testfleet.Unique("weir_other")
	defer Exec(context.Background(), c, NewStmt(false).S("DROP DATABASE IF EXISTS ", db))
	defer Exec(context.Background(), c, NewStmt(false).S("DROP DATABASE IF EXISTS ", other))
	cfg := Config{Database: db, Retention: 30 * 24 * time.Hour}
	res, err := Setup(ctx, c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Features.TTL == (len(res.Warnings) > 0) {
		t.Errorf("TTL %v but warnings %q", res.Features.TTL, res.Warnings)
	}
	tables := func() string {
		s := NewStmt(false).S("SELECT name FROM system.tables WHERE database = ").Str(db).S(" ORDER BY name FORMAT RowBinary")
		rc, err := c.Do(ctx, s.SQL(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		r := newReader(rc)
		var names []string
		for r.more() {
			names = append(names, r.str())
		}
		return strings.Join(names, " ")
	}
	want := "flows flows_1h flows_1m flows_input flows_input_1h_mv flows_input_1m_mv flows_input_mv ingest_offsets"
	if got := tables(); got != want {
		t.Errorf("tables %q, want %q", got, want)
	}
	if _, err := Setup(ctx, c, cfg); err != nil {
		t.Errorf("second setup: %v", err)
	}
	if got := tables(); got != want {
		t.Errorf("after a second setup: tables %q", got)
	}
	// a flows table that IF NOT EXISTS would keep, of another layout
	if err := Exec(ctx, c, NewStmt(false).S("CREATE DATABASE IF NOT EXISTS ", other)); err != nil {
		t.Fatal(err)
	}
	if err := Exec(ctx, c, NewStmt(false).S("CREATE TABLE IF NOT EXISTS ", other, ".flows (start DateTime, x UInt8) ENGINE = MergeTree() ORDER BY start")); err != nil {
		t.Fatal(err)
	}
	if _, err := Setup(ctx, c, Config{Database: other}); err == nil || !strings.Contains(err.Error(), "other columns") {
		t.Errorf("setup over a foreign flows table: %v", err)
	}
	if _, err := Setup(ctx, c, Config{Database: "weir; DROP"}); err == nil {
		t.Error("a database name with SQL in it was accepted")
	}
}

// testQuote: hostile strings (quotes, backslashes, control bytes, invalid
// UTF-8, an attempt to close the literal) come back from the server byte
// for byte, as literals and as query parameters where the server has them.
func testQuote(t *testing.T, c Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := Probe(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	vals := []string{"", "'", "\\", "\\'", "''", "a' OR 1 = 1 --", "x'); DROP TABLE t; --", "\x00\x01\n\r\t\x7f",
		"\xff\xfe", "é ノード", "{p0:String}", "$$", "\\x41", "'\\''"}
	r := rand.New(rand.NewPCG(1, 1))
	for range 50 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		vals = append(vals, string(b))
	}
	for _, params := range []bool{false, f.Params} {
		if params { // chdb's runner takes parameters as JSON strings: valid UTF-8 only
			for i, v := range vals {
				vals[i] = strings.ToValidUTF8(v, "?")
			}
		}
		s := NewStmt(params).S("SELECT ")
		for i, v := range vals {
			if i > 0 {
				s.S(", ")
			}
			s.Str(v)
		}
		s.S(" FORMAT RowBinary")
		rc, err := c.Do(ctx, s.SQL(), s.Params(), nil)
		if err != nil {
			t.Fatalf("params %v: %v", params, err)
		}
		rd := newReader(rc)
		for i, v := range vals {
			if got := rd.str(); got != v {
				t.Errorf("params %v: value %d: sent %q, got %q", params, i, v, got)
			}
		}
		if rd.err != nil || rd.more() {
			t.Errorf("params %v: response: %v", params, rd.err)
		}
		rc.Close()
	}
}

// FuzzQuote: a quoted string is printable ASCII, is one literal (the
// quote that ends it is its last byte) and stands for exactly the string,
// read by ClickHouse's rules for string literals.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "'", "\\'", "a\x00b", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := Quote(s)
		for i := 0; i < len(q); i++ {
			if q[i] < 0x20 || q[i] >= 0x7f {
				t.Fatalf("byte %#x in %q", q[i], q)
			}
		}
		got, n, err := unquote(q)
		if err != nil || n != len(q) || got != s {
			t.Fatalf("Quote(%q) = %q reads back as %q (%d of %d bytes, %v)", s, q, got, n, len(q), err)
		}
	})
}

// unquote reads a ClickHouse string literal at the start of q the way
// ClickHouse's lexer does (a quote doubled or backslashed is a quote; \x
// takes two hex digits; \n \t \r \0 \b \f \a \v; a backslash before any
// other byte is that byte), returning it and how many bytes it took.
func unquote(q string) (string, int, error) {
	if q == "" || q[0] != '\'' {
		return "", 0, errors.New("no opening quote")
	}
	var b bytes.Buffer
	for i := 1; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'' && i+1 < len(q) && q[i+1] == '\'':
			b.WriteByte('\'')
			i++
		case c == '\'':
			return b.String(), i + 1, nil
		case c == '\\' && i+1 < len(q):
			i++
			switch e := q[i]; e {
			case 'x':
				if i+2 >= len(q) {
					return "", 0, errors.New("short \\x")
				}
				var v byte
				for _, h := range q[i+1 : i+3] {
					v <<= 4
					switch {
					case h >= '0' && h <= '9':
						v |= byte(h - '0')
					case h >= 'A' && h <= 'F':
						v |= byte(h - 'A' + 10)
					case h >= 'a' && h <= 'f':
						v |= byte(h - 'a' + 10)
					default:
						return "", 0, errors.New("bad \\x")
					}
				}
				b.WriteByte(v)
				i += 2
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'a':
				b.WriteByte('\a')
			case 'v':
				b.WriteByte('\v')
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, errors.New("no closing quote")
}
