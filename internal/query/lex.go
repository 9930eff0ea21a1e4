package query

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// SyntaxError is a mistake in a query string: Pos and End are the byte
// offsets of the offending token in Input.
type SyntaxError struct {
	Input    string
	Pos, End int
	Msg      string
}

// Error says what is wrong and where, on one line.
func (e *SyntaxError) Error() string {
	tok := "end of input"
	if e.Pos < len(e.Input) {
		tok = fmt.Sprintf("%q", e.Input[e.Pos:max(e.End, e.Pos+1)])
	}
	return fmt.Sprintf("%s at offset %d (%s)", e.Msg, e.Pos, tok)
}

// Caret renders the input with a line of carets under the offending token,
// for a terminal.
func (e *SyntaxError) Caret() string {
	in := strings.Map(func(r rune) rune { // tabs and newlines would shift the carets
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, e.Input)
	pad := utf8.RuneCountInString(in[:min(e.Pos, len(in))])
	n := max(1, utf8.RuneCountInString(in[min(e.Pos, len(in)):min(max(e.End, e.Pos), len(in))]))
	return "  " + in + "\n  " + strings.Repeat(" ", pad) + strings.Repeat("^", n)
}

// tokKind is a token's kind.
type tokKind uint8

const (
	tEOF tokKind = iota
	tWord
	tOp     // = == != < > <= >=
	tNot    // !
	tAnd    // &&
	tOr     // ||
	tLParen // (
	tRParen // )
)

type token struct {
	kind     tokKind
	text     string // the word (unquoted) or operator
	pos, end int
}

// maxInput bounds a condition string: parsing is linear, but an absurd
// input is more likely a mistake than a query.
const maxInput = 64 << 10

// isWordByte reports whether c can appear in an unquoted word: names,
// numbers, IPv4/IPv6 addresses and CIDR prefixes, interface names.
func isWordByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("._:/-+%@", c) >= 0 || c >= utf8.RuneSelf
}

// lex splits s into tokens, ending with tEOF.
func lex(s string) ([]token, error) {
	if len(s) > maxInput {
		return nil, &SyntaxError{Input: s[:64] + "…", Pos: 0, End: 1, Msg: fmt.Sprintf("condition longer than %d bytes", maxInput)}
	}
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(' || c == ')':
			k := tLParen
			if c == ')' {
				k = tRParen
			}
			out = append(out, token{k, s[i : i+1], i, i + 1})
			i++
		case c == '=' || c == '<' || c == '>' || c == '!':
			j := i + 1
			if j < len(s) && s[j] == '=' {
				j++
			}
			op := s[i:j]
			k := tOp
			if op == "!" {
				k = tNot
			}
			out = append(out, token{k, op, i, j})
			i = j
		case c == '&' || c == '|':
			if i+1 >= len(s) || s[i+1] != c {
				return nil, &SyntaxError{s, i, i + 1, fmt.Sprintf("%q must be doubled (%c%c) or written %s", c, c, c, map[byte]string{'&': "and", '|': "or"}[c])}
			}
			k := tAnd
			if c == '|' {
				k = tOr
			}
			out = append(out, token{k, s[i : i+2], i, i + 2})
			i += 2
		case c == '"' || c == '\'':
			w, j, ok := unquote(s, i)
			if !ok {
				return nil, &SyntaxError{s, i, len(s), "unterminated quoted string"}
			}
			out = append(out, token{tWord, w, i, j})
			i = j
		case isWordByte(c):
			j := i
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			w := s[i:j]
			switch strings.ToLower(w) {
			case "and":
				out = append(out, token{tAnd, w, i, j})
			case "or":
				out = append(out, token{tOr, w, i, j})
			case "not":
				out = append(out, token{tNot, w, i, j})
			default:
				out = append(out, token{tWord, w, i, j})
			}
			i = j
		default:
			_, n := utf8.DecodeRuneInString(s[i:])
			return nil, &SyntaxError{s, i, i + n, "unexpected character"}
		}
	}
	return append(out, token{kind: tEOF, pos: len(s), end: len(s)}), nil
}

// unquote reads the string quoted by s[i] ('"' or '\”), in which a
// backslash takes the next byte literally; it returns the text and the
// offset after the closing quote.
func unquote(s string, i int) (string, int, bool) {
	q := s[i]
	var b strings.Builder
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case q:
			return b.String(), j + 1, true
		case '\\':
			if j++; j == len(s) {
				return "", 0, false
			}
		}
		b.WriteByte(s[j])
	}
	return "", 0, false
}

// Quote renders w as one word of the query language: as it is when it
// reads back as itself, else in double quotes.
func Quote(w string) string { return quote(w) }

// quote renders a value so that lex reads it back as one word.
func quote(w string) string {
	plain := w != ""
	for i := 0; i < len(w); i++ {
		plain = plain && isWordByte(w[i])
	}
	if _, kw := map[string]bool{"and": true, "or": true, "not": true}[strings.ToLower(w)]; plain && !kw {
		return w
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(w); i++ {
		if w[i] == '"' || w[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(w[i])
	}
	b.WriteByte('"')
	return b.String()
}
