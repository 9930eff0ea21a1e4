package enrich

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf16"
)

// jsonForYAML checks that data is JSON and rewrites what YAML reads
// differently, keeping every byte on its line so that errors point at the
// right one: tabs between tokens become spaces, "\/" becomes "/", and
// "\uD83D\uDE00" surrogate pairs become "\U0001F600" (a lone surrogate
// becomes U+FFFD, as encoding/json decodes it).
func jsonForYAML(data []byte) ([]byte, error) {
	if err := checkJSON(data); err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(data))
	in := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case !in && c == '\t':
			out = append(out, ' ')
		case !in:
			if c == '"' {
				in = true
			}
			out = append(out, c)
		case c == '"':
			in = false
			out = append(out, c)
		case c == '\\' && i+1 < len(data):
			i++
			switch data[i] {
			case '/':
				out = append(out, '/')
			case 'u': // data[i+1:i+5] are hex digits: the JSON is valid
				r := hex4(data[i+1:])
				if !utf16.IsSurrogate(r) {
					out = append(out, data[i-1:i+5]...)
					i += 4
					break
				}
				if j := i + 5; j+6 <= len(data) && data[j] == '\\' && data[j+1] == 'u' {
					if p := utf16.DecodeRune(r, hex4(data[j+2:])); p != unicode.ReplacementChar {
						out = fmt.Appendf(out, `\U%08X`, p)
						i = j + 5
						break
					}
				}
				out = append(out, `\uFFFD`...)
				i += 4
			default:
				out = append(out, '\\', data[i])
			}
		default:
			out = append(out, c)
		}
	}
	return out, nil
}

// hex4 decodes the 4 hex digits at the start of b, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 16)
	if err != nil {
		return -1
	}
	return rune(v)
}

// checkJSON reports a JSON syntax error with its line.
func checkJSON(data []byte) error {
	var v json.RawMessage
	err := json.Unmarshal(data, &v)
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte{'\n'})
		return fmt.Errorf("line %d: not valid JSON: %v", line, se)
	}
	return fmt.Errorf("not valid JSON: %v", err)
}
