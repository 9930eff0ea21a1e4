package pcapfilter

import (
	"net/netip"
	"strconv"
	"strings"
)

// tokKind is the lexical class of a token.
type tokKind uint8

const (
	tEOF   tokKind = iota
	tWord          // keyword or name (port, protocol, constant, "10-20")
	tNum           // number: decimal, 0x hex or 0-prefixed octal
	tV4            // dotted IPv4 address, possibly partial ("10.1")
	tV6            // IPv6 address
	tMAC           // Ethernet address
	tPunct         // operator or bracket
)

// token is one lexical token. Text is the source text (for punctuation the
// canonical operator: "&&" is "and", "||" is "or", "!" is "not", "==" is "=").
type token struct {
	kind    tokKind
	pos     int
	text    string
	src     string // the text as written, for error messages
	num     uint32
	v4      [4]byte
	v4Parts int // number of dotted parts written (1-4)
	v6      netip.Addr
	mac     [6]byte
	escaped bool // written with a leading backslash: never a keyword
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// maxAddrLen bounds the text of an IPv6 or MAC address
// ("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255" is 45 bytes).
const maxAddrLen = 64

// lex splits the expression into tokens, ending with a tEOF token.
func lex(s string) ([]token, error) {
	var toks []token
	i := 0
	for i < len(s) {
		c := s[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' {
			i++
			continue
		}
		start := i
		if c == '\\' {
			j := i + 1
			for j < len(s) && (isAlnum(s[j]) || s[j] == '-' || s[j] == '_' || s[j] == '.') {
				j++
			}
			if j == i+1 {
				return nil, &SyntaxError{Pos: i, Token: "\\", Msg: "a backslash must be followed by a name"}
			}
			toks = append(toks, token{kind: tWord, pos: start, text: strings.ToLower(s[i+1 : j]), src: s[i:j], escaped: true})
			i = j
			continue
		}
		if isHex(c) || c == ':' {
			// IPv6 and MAC addresses contain ':'; try the longest run first,
			// but no longer than any address (keeps lexing linear).
			j := i
			for j < len(s) && j-i <= maxAddrLen && (isHex(s[j]) || s[j] == ':' || s[j] == '.') {
				j++
			}
			if run := s[i:j]; j-i <= maxAddrLen && strings.IndexByte(run, ':') >= 0 && (j == len(s) || !isAlnum(s[j])) {
				if a, err := netip.ParseAddr(run); err == nil && a.Is6() && a.Zone() == "" {
					toks = append(toks, token{kind: tV6, pos: start, text: run, src: run, v6: a})
					i = j
					continue
				}
				if m, ok := parseMAC(run); ok {
					toks = append(toks, token{kind: tMAC, pos: start, text: run, src: run, mac: m})
					i = j
					continue
				}
			}
		}
		if isAlnum(c) {
			j := i
			for j < len(s) && (isAlnum(s[j]) || s[j] == '-' || s[j] == '_' || s[j] == '.') {
				j++
			}
			for j > i+1 && (s[j-1] == '-' || s[j-1] == '.' || s[j-1] == '_') {
				j--
			}
			t, err := classifyWord(s[i:j], start)
			if err != nil {
				return nil, err
			}
			toks = append(toks, t)
			i = j
			continue
		}
		if i+1 < len(s) {
			two := s[i : i+2]
			canon := ""
			switch two {
			case "&&":
				canon = "and"
			case "||":
				canon = "or"
			case "==":
				canon = "="
			case "!=", "<=", ">=", "<<", ">>":
				canon = two
			}
			if canon != "" {
				toks = append(toks, token{kind: tPunct, pos: start, text: canon, src: two})
				i += 2
				continue
			}
		}
		switch c {
		case '(', ')', '[', ']', ':', '=', '<', '>', '+', '-', '*', '/', '%', '&', '|', '^':
			toks = append(toks, token{kind: tPunct, pos: start, text: string(c), src: string(c)})
		case '!':
			toks = append(toks, token{kind: tPunct, pos: start, text: "not", src: "!"})
		default:
			end := i + 1
			for end < len(s) && s[end] >= 0x80 && s[end] < 0xc0 { // keep a UTF-8 sequence whole
				end++
			}
			return nil, &SyntaxError{Pos: i, Token: s[i:end], Msg: "unexpected character"}
		}
		i++
	}
	toks = append(toks, token{kind: tEOF, pos: len(s)})
	return toks, nil
}

// classifyWord turns a word into a number, an IPv4 address, a MAC address
// or a name.
func classifyWord(w string, pos int) (token, error) {
	t := token{kind: tWord, pos: pos, text: strings.ToLower(w), src: w}
	if m, ok := parseMAC(w); ok && strings.Count(w, ".") == 2 {
		t.kind, t.mac = tMAC, m
		return t, nil
	}
	if w[0] >= '0' && w[0] <= '9' {
		if strings.IndexByte(w, '.') >= 0 && strings.Trim(w, "0123456789.") == "" {
			parts := strings.Split(w, ".")
			if len(parts) > 4 {
				return t, &SyntaxError{Pos: pos, Token: w, Msg: "invalid IPv4 address"}
			}
			for k, p := range parts {
				v, err := strconv.ParseUint(p, 10, 8)
				if err != nil {
					return t, &SyntaxError{Pos: pos, Token: w, Msg: "invalid IPv4 address"}
				}
				t.v4[k] = byte(v)
			}
			t.kind, t.v4Parts = tV4, len(parts)
			return t, nil
		}
		if m, ok := parseMAC(w); ok {
			t.kind, t.mac = tMAC, m
			return t, nil
		}
		if strings.IndexByte(w, '-') < 0 && strings.IndexByte(w, '.') < 0 {
			v, err := parseNum(w)
			if err != nil {
				return t, &SyntaxError{Pos: pos, Token: w, Msg: err.Error()}
			}
			t.kind, t.num = tNum, v
			return t, nil
		}
	}
	return t, nil
}

// parseNum parses a decimal, 0x-hex or 0-octal number that fits 32 bits.
func parseNum(w string) (uint32, error) {
	base, digits := 10, w
	switch {
	case len(w) > 1 && (w[1] == 'x' || w[1] == 'X') && w[0] == '0':
		base, digits = 16, w[2:]
	case len(w) > 1 && w[0] == '0':
		base, digits = 8, w[1:]
	}
	v, err := strconv.ParseUint(digits, base, 32)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, errorString("number does not fit in 32 bits")
		}
		return 0, errorString("invalid number")
	}
	return uint32(v), nil
}

type errorString string

func (e errorString) Error() string { return string(e) }

// parseMAC parses an Ethernet address written as six groups of one or two
// hex digits separated by ':' or '-', or as three groups of four hex digits
// separated by '.'.
func parseMAC(s string) ([6]byte, bool) {
	var m [6]byte
	if strings.Count(s, ".") == 2 && len(s) == 14 {
		for k, g := range strings.Split(s, ".") {
			v, err := strconv.ParseUint(g, 16, 16)
			if err != nil || len(g) != 4 {
				return m, false
			}
			m[2*k], m[2*k+1] = byte(v>>8), byte(v)
		}
		return m, true
	}
	sep := ":"
	if strings.IndexByte(s, '-') >= 0 {
		sep = "-"
	}
	groups := strings.Split(s, sep)
	if len(groups) != 6 {
		return m, false
	}
	for k, g := range groups {
		if len(g) < 1 || len(g) > 2 {
			return m, false
		}
		v, err := strconv.ParseUint(g, 16, 8)
		if err != nil {
			return m, false
		}
		m[k] = byte(v)
	}
	return m, true
}
