// Package termsafe makes text from the network or from files safe to
// print on a terminal: interface names, NFLOG prefixes, inventory names,
// exporter addresses, file names in error messages. Printed raw, a hostile
// name could retitle the window (OSC), clear the screen, move the cursor,
// or reorder the text after it (Unicode bidi overrides).
//
// There is one escaping rule, used three ways: String for one name or
// value (a table cell), Message for a whole message that may already hold
// escapes, and Writer for a stream of lines (weir's stderr).
package termsafe

import (
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// String returns s with every byte or rune a terminal could act on written
// as a visible escape, like strconv.Quote without the surrounding quotes:
// C0 controls and DEL as \a \b \f \n \r \t \v or \xNN, invalid UTF-8 as
// \xNN, and every other rune that is not printable (C1 controls, bidi
// overrides and isolates, zero-width and other format characters, line
// and paragraph separators, non-ASCII spaces) as \uNNNN or \UNNNNNNNN. A
// backslash becomes \\, so the result reads back unambiguously. Printable
// text, non-ASCII letters included, is unchanged, and s itself is returned
// (no allocation) when nothing needs escaping. Every rune of the result
// is printable, so a column's width can be taken from it.
func String(s string) string {
	return escape(s, escBackslash)
}

// Message is String for a whole message that may already hold escapes
// (an error that quoted a name with %q): it leaves backslashes alone, so
// they are not doubled, and escapes everything else as String does.
func Message(s string) string {
	return escape(s, 0)
}

// Writer escapes what is written through it as Message does, except that
// newlines and tabs pass: each line stays a line. It is meant for a
// program's stderr, where messages from every layer end up; names in them
// should still be escaped with String where they are formatted, since a
// name with a newline could otherwise start a line of its own.
type Writer struct{ w io.Writer }

// NewWriter returns a Writer in front of w.
func NewWriter(w io.Writer) *Writer { return &Writer{w} }

// Write writes p escaped. It reports len(p) on success, as io.Writer asks,
// whatever the escaped length. A rune split across two writes is escaped
// as its bytes.
func (w *Writer) Write(p []byte) (int, error) {
	s := escape(string(p), keepLines)
	if _, err := io.WriteString(w.w, s); err != nil {
		return 0, err
	}
	return len(p), nil
}

type mode uint8

const (
	escBackslash mode = 1 << iota // \ → \\
	keepLines                     // \n and \t pass
)

const hex = "0123456789abcdef"

// plain reports whether byte c passes unchanged under m.
func plain(c byte, m mode) bool {
	switch {
	case c >= 0x20 && c < 0x7f:
		return c != '\\' || m&escBackslash == 0
	case c == '\n' || c == '\t':
		return m&keepLines != 0
	}
	return false
}

func escape(s string, m mode) string {
	i := 0
	for i < len(s) && plain(s[i], m) { // fast path: nothing to escape
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if plain(c, m) {
			b.WriteByte(c)
			i++
			continue
		}
		if c == '\\' {
			b.WriteString(`\\`)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			byteEscape(&b, c)
		case r < 0x80:
			if e := strings.IndexByte("\a\b\f\n\r\t\v", c); e >= 0 {
				b.WriteByte('\\')
				b.WriteByte("abfnrtv"[e])
			} else {
				byteEscape(&b, c)
			}
		case strconv.IsPrint(r): // letters, marks, numbers, punctuation, symbols
			b.WriteString(s[i : i+n])
		case r < 0x10000:
			b.WriteString(`\u`)
			for sh := 12; sh >= 0; sh -= 4 {
				b.WriteByte(hex[r>>sh&0xf])
			}
		default:
			b.WriteString(`\U`)
			for sh := 28; sh >= 0; sh -= 4 {
				b.WriteByte(hex[r>>sh&0xf])
			}
		}
		i += n
	}
	return b.String()
}

func byteEscape(b *strings.Builder, c byte) {
	b.WriteString(`\x`)
	b.WriteByte(hex[c>>4])
	b.WriteByte(hex[c&0xf])
}

// Inert reports whether s is safe to print as it is: valid UTF-8 whose
// runes are all printable, newlines and tabs aside. Everything String,
// Message and Writer produce is.
func Inert(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") || r != '\n' && r != '\t' && !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}
