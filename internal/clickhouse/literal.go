package clickhouse

import (
	"fmt"
	"strconv"
	"strings"
)

// Stmt builds one SQL statement: weir's own text, with user values added
// only through Str (a query parameter where the server has them, else a
// literal from Quote) and the numeric methods (formatted by strconv), so
// that no user value can change the statement.
type Stmt struct {
	b      strings.Builder
	params map[string]string
	use    bool // query parameters
}

// NewStmt starts a statement; params says whether the server takes query
// parameters.
func NewStmt(params bool) *Stmt { return &Stmt{use: params} }

// S appends weir's own SQL text (never a user value).
func (s *Stmt) S(sql ...string) *Stmt {
	for _, p := range sql {
		s.b.WriteString(p)
	}
	return s
}

// Str appends a user string as a String value.
func (s *Stmt) Str(v string) *Stmt {
	if !s.use {
		s.b.WriteString(Quote(v))
		return s
	}
	if s.params == nil {
		s.params = map[string]string{}
	}
	name := "p" + strconv.Itoa(len(s.params))
	s.params[name] = escapeParam(v)
	s.b.WriteString("{" + name + ":String}")
	return s
}

// Uint appends an unsigned number.
func (s *Stmt) Uint(v uint64) *Stmt {
	s.b.WriteString(strconv.FormatUint(v, 10))
	return s
}

// Int appends a signed number.
func (s *Stmt) Int(v int64) *Stmt {
	s.b.WriteString(strconv.FormatInt(v, 10))
	return s
}

// Bytes appends raw bytes (an address) as unhex('…'): hex digits only.
func (s *Stmt) Bytes(b []byte) *Stmt {
	s.b.WriteString("unhex('")
	const hex = "0123456789abcdef"
	for _, c := range b {
		s.b.WriteByte(hex[c>>4])
		s.b.WriteByte(hex[c&15])
	}
	s.b.WriteString("')")
	return s
}

// escapeParam writes v as ClickHouse reads a query parameter's value: in
// the escaped (TSV) form, so a backslash, tab or newline stands for itself.
func escapeParam(v string) string {
	if !strings.ContainsAny(v, "\\\t\n\r\x00\b\f") {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case 0:
			b.WriteString(`\0`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// SQL is the statement's text.
func (s *Stmt) SQL() string { return s.b.String() }

// Params are its query parameters (nil without).
func (s *Stmt) Params() map[string]string { return s.params }

// Quote returns v as a ClickHouse string literal that stands for exactly v
// in every server version: in single quotes, with the backslash and the
// quote escaped, and every byte outside printable ASCII written as \xHH,
// so the literal is printable ASCII whatever v holds.
func Quote(v string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(v) + 2)
	b.WriteByte('\'')
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\' || c == '\'':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// CheckIdent accepts a database or table name weir writes unquoted:
// a letter or underscore, then letters, digits and underscores, at most 64.
func CheckIdent(what, s string) error {
	if s == "" || len(s) > 64 {
		return fmt.Errorf("clickhouse: %s %q: want 1 to 64 of a-z A-Z 0-9 _, not starting with a digit", what, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return fmt.Errorf("clickhouse: %s %q: want 1 to 64 of a-z A-Z 0-9 _, not starting with a digit", what, s)
		}
	}
	return nil
}
