package metrics

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of ParseText, so hostile or runaway input costs bounded memory.
const (
	// MaxParseLine is the longest line ParseText accepts, newline included.
	MaxParseLine = 64 << 10
	// MaxParseSamples is the most samples (and, separately, families)
	// ParseText accepts.
	MaxParseSamples = 100_000
	// MaxParseBytes is the most input ParseText reads.
	MaxParseBytes = 64 << 20
)

// ParseText parses the text exposition format 0.0.4 into a map from series
// to value. A series is written `name{a="x",b="y"}` with the labels sorted by
// name and their values escaped as in the format (\\, \", \n); a series
// without labels is just its name. Timestamps are accepted and ignored.
//
// It is strict, for tests: it rejects, with an error naming the line, any
// malformed line, invalid name or escape, a label repeated in a sample, a
// series that appears twice, a second # HELP or # TYPE for a family or one
// after its samples, a family whose lines are not grouped together, a
// missing final newline, and input beyond MaxParseLine, MaxParseSamples or
// MaxParseBytes.
func ParseText(r io.Reader) (map[string]float64, error) {
	p := parser{
		out:   map[string]float64{},
		fams:  map[string]*famState{},
		lr:    &io.LimitedReader{R: r, N: MaxParseBytes + 1},
		label: make([]labelPair, 0, 8),
	}
	br := bufio.NewReaderSize(p.lr, 4096) // small: most inputs are small; longer lines are gathered in p.long
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			p.long = append(p.long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(p.long) <= MaxParseLine {
				line, err = br.ReadSlice('\n')
				p.long = append(p.long, line...)
			}
			if len(p.long) > MaxParseLine {
				return nil, fmt.Errorf("line %d: longer than %d bytes", p.line+1, MaxParseLine)
			}
			line = p.long
		}
		switch {
		case err == io.EOF:
			if p.lr.N <= 0 {
				return nil, fmt.Errorf("line %d: input longer than %d bytes", p.line+1, MaxParseBytes)
			}
			if len(line) > 0 {
				return nil, fmt.Errorf("line %d: no final newline (truncated input?)", p.line+1)
			}
			return p.out, nil
		case err != nil:
			return nil, fmt.Errorf("line %d: %w", p.line+1, err)
		}
		p.line++
		if err := p.parseLine(line[:len(line)-1]); err != nil {
			return nil, fmt.Errorf("line %d: %w", p.line, err)
		}
	}
}

// famState is what the parser knows of a family.
type famState struct {
	typ      string // from # TYPE, or ""
	help     bool   // a # HELP was seen
	samples  bool   // a sample was seen
	lastLine int    // the last line that belonged to the family
}

type labelPair struct{ name, value string }

type parser struct {
	out     map[string]float64
	fams    map[string]*famState
	current string // the family of the previous HELP, TYPE or sample line
	line    int
	lr      *io.LimitedReader
	label   []labelPair // scratch, reused per sample
	key     []byte      // scratch, reused per sample
	long    []byte      // a line longer than the reader's buffer
}

// parseLine parses one line without its newline.
func (p *parser) parseLine(l []byte) error {
	if !utf8.Valid(l) {
		return errors.New("not valid UTF-8")
	}
	if len(bytes.Trim(l, " \t")) == 0 {
		return nil // empty lines are ignored
	}
	if l[0] == '#' {
		return p.parseComment(l[1:])
	}
	return p.parseSample(l)
}

// family returns the state of the family name, checking that its lines are
// grouped together.
func (p *parser) family(name string) (*famState, error) {
	f := p.fams[name]
	if f == nil {
		if len(p.fams) >= MaxParseSamples {
			return nil, fmt.Errorf("more than %d families", MaxParseSamples)
		}
		f = &famState{}
		p.fams[name] = f
	} else if name != p.current {
		return nil, fmt.Errorf("family %s continues after other families (last seen on line %d): lines of a family must be grouped", name, f.lastLine)
	}
	p.current = name
	f.lastLine = p.line
	return f, nil
}

// parseComment parses what follows a '#': # HELP, # TYPE or another comment.
func (p *parser) parseComment(l []byte) error {
	l = skipBlank(l)
	kw, rest := token(l)
	if kw != "HELP" && kw != "TYPE" {
		return nil // a plain comment
	}
	if len(rest) == 0 || (rest[0] != ' ' && rest[0] != '\t') {
		return fmt.Errorf("# %s without a metric name", kw)
	}
	name, rest := token(skipBlank(rest))
	if !validMetricName(name) {
		return fmt.Errorf("# %s: invalid metric name %q", kw, name)
	}
	f, err := p.family(name)
	if err != nil {
		return err
	}
	if f.samples {
		return fmt.Errorf("# %s %s after its samples", kw, name)
	}
	if kw == "HELP" {
		if f.help {
			return fmt.Errorf("second # HELP for %s", name)
		}
		f.help = true
		if len(rest) > 0 {
			rest = rest[1:] // the docstring follows one blank
		}
		if _, err := unescape(nil, rest, false); err != nil {
			return fmt.Errorf("# HELP %s: %w", name, err)
		}
		return nil
	}
	if f.typ != "" {
		return fmt.Errorf("second # TYPE for %s", name)
	}
	typ, rest := token(skipBlank(rest))
	switch typ {
	case "counter", "gauge", "histogram", "summary", "untyped":
	default:
		return fmt.Errorf("# TYPE %s: unknown type %q", name, typ)
	}
	if len(skipBlank(rest)) != 0 {
		return fmt.Errorf("# TYPE %s %s: unexpected %q", name, typ, rest)
	}
	f.typ = typ
	return nil
}

// familyOf returns the family a sample name belongs to: the name itself, or
// for name_bucket, name_sum and name_count the histogram or summary name.
func (p *parser) familyOf(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if f := p.fams[base]; f != nil && (f.typ == "histogram" || (f.typ == "summary" && suffix != "_bucket")) {
			return base
		}
	}
	return name
}

// parseSample parses `name[{labels}] value [timestamp]`.
func (p *parser) parseSample(l []byte) error {
	i := 0
	for i < len(l) && (l[i] == '_' || l[i] == ':' || isLetter(l[i]) || (i > 0 && isDigit(l[i]))) {
		i++
	}
	name := string(l[:i])
	if !validMetricName(name) {
		return fmt.Errorf("invalid metric name at %q", trim(l))
	}
	l = l[i:]
	p.label = p.label[:0]
	if len(l) > 0 && l[0] == '{' {
		var err error
		if l, err = p.parseLabels(l[1:]); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if len(l) == 0 || (l[0] != ' ' && l[0] != '\t') {
		return fmt.Errorf("%s: want a blank and a value, got %q", name, trim(l))
	}
	valTok, l := token(skipBlank(l))
	v, err := strconv.ParseFloat(valTok, 64)
	if err != nil {
		return fmt.Errorf("%s: invalid value %q", name, valTok)
	}
	if l = skipBlank(l); len(l) > 0 {
		ts, rest := token(l)
		if _, err := strconv.ParseInt(ts, 10, 64); err != nil {
			return fmt.Errorf("%s: invalid timestamp %q", name, ts)
		}
		if len(skipBlank(rest)) != 0 {
			return fmt.Errorf("%s: unexpected %q after the timestamp", name, trim(rest))
		}
	}
	f, err := p.family(p.familyOf(name))
	if err != nil {
		return err
	}
	f.samples = true
	sort.Slice(p.label, func(a, b int) bool { return p.label[a].name < p.label[b].name })
	k := append(p.key[:0], name...)
	if len(p.label) > 0 {
		k = append(k, '{')
		for j, lp := range p.label {
			if j > 0 {
				if lp.name == p.label[j-1].name {
					return fmt.Errorf("%s: label %s appears twice", name, lp.name)
				}
				k = append(k, ',')
			}
			k = append(k, lp.name...)
			k = append(k, '=', '"')
			k = appendEscaped(k, lp.value, true)
			k = append(k, '"')
		}
		k = append(k, '}')
	}
	p.key = k
	if _, dup := p.out[string(k)]; dup { // string(k) in a map index does not allocate
		return fmt.Errorf("duplicate series %s", k)
	}
	if len(p.out) >= MaxParseSamples {
		return fmt.Errorf("more than %d samples", MaxParseSamples)
	}
	p.out[string(k)] = v
	return nil
}

// parseLabels parses `name="value",...}` (the '{' already consumed) into
// p.label and returns what follows the '}'.
func (p *parser) parseLabels(l []byte) ([]byte, error) {
	for {
		if len(l) > 0 && l[0] == '}' {
			return l[1:], nil
		}
		i := 0
		for i < len(l) && (l[i] == '_' || isLetter(l[i]) || (i > 0 && isDigit(l[i]))) {
			i++
		}
		if i == 0 {
			return nil, fmt.Errorf("want a label name or '}', got %q", trim(l))
		}
		lname := string(l[:i])
		l = l[i:]
		if len(l) < 2 || l[0] != '=' || l[1] != '"' {
			return nil, fmt.Errorf("label %s: want =\"", lname)
		}
		l = l[2:]
		end := closingQuote(l)
		if end < 0 {
			return nil, fmt.Errorf("label %s: unterminated value", lname)
		}
		val, err := unescape(nil, l[:end], true)
		if err != nil {
			return nil, fmt.Errorf("label %s: %w", lname, err)
		}
		p.label = append(p.label, labelPair{lname, string(val)})
		l = l[end+1:]
		switch {
		case len(l) > 0 && l[0] == ',':
			l = l[1:]
		case len(l) > 0 && l[0] == '}':
		default:
			return nil, fmt.Errorf("label %s: want ',' or '}' after the value, got %q", lname, trim(l))
		}
	}
}

// closingQuote returns the index of the first unescaped '"' in l, or -1.
func closingQuote(l []byte) int {
	for i := 0; i < len(l); i++ {
		switch l[i] {
		case '\\':
			i++ // skip the escaped byte
		case '"':
			return i
		}
	}
	return -1
}

// unescape appends s with \\ and \n (and, in label values, \") resolved;
// any other backslash sequence, or a raw '"' in a label value, is an error.
func unescape(dst, s []byte, label bool) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' && label {
			return nil, errors.New(`unescaped '"'`)
		}
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		if i++; i == len(s) {
			return nil, errors.New(`trailing '\'`)
		}
		switch s[i] {
		case '\\':
			dst = append(dst, '\\')
		case 'n':
			dst = append(dst, '\n')
		case '"':
			if !label {
				return nil, errors.New(`invalid escape \" in help (quotes are not escaped there)`)
			}
			dst = append(dst, '"')
		default:
			return nil, fmt.Errorf(`invalid escape \%c`, s[i])
		}
	}
	return dst, nil
}

// token splits l at the first blank (space or tab).
func token(l []byte) (string, []byte) {
	i := bytes.IndexAny(l, " \t")
	if i < 0 {
		return string(l), nil
	}
	return string(l[:i]), l[i:]
}

// skipBlank drops leading spaces and tabs.
func skipBlank(l []byte) []byte { return bytes.TrimLeft(l, " \t") }

// trim shortens l for an error message.
func trim(l []byte) string {
	if len(l) > 40 {
		return string(l[:40]) + "..."
	}
	return string(l)
}
