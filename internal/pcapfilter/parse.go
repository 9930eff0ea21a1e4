package pcapfilter

import (
	"fmt"

	"github.com/weir-dev/weir/internal/iana"
)

// dir is a direction qualifier.
type dir uint8

const (
	dDefault dir = iota
	dSrc
	dDst
	dOr  // src or dst
	dAnd // src and dst
)

// addrKind is an address type qualifier.
type addrKind uint8

const (
	aDefault addrKind = iota
	aHost
	aNet
	aPort
	aPortrange
	aProto
)

// qual is the qualifier set of a primitive ("tcp src port"). A bare value
// after and/or repeats the qualifiers of the primitive before it, as pcap
// does ("port 80 or 443"); valid is false when there are none to repeat.
type qual struct {
	proto proto
	dir   dir
	addr  addrKind
	valid bool
}

// parser is a recursive-descent parser of pcap-filter(7) that generates
// the boolean IR as it goes.
type parser struct {
	toks   []token
	i      int
	link   LinkType
	depth  int
	checks map[proto]loadCheck
}

func (p *parser) cur() token { return p.toks[p.i] }
func (p *parser) peek(n int) token {
	if p.i+n < len(p.toks) {
		return p.toks[p.i+n]
	}
	return p.toks[len(p.toks)-1]
}
func (p *parser) prev() token {
	if p.i > 0 {
		return p.toks[p.i-1]
	}
	return p.toks[0]
}
func (p *parser) next() token {
	t := p.toks[p.i]
	if p.i < len(p.toks)-1 {
		p.i++
	}
	return t
}

// is reports whether the current token is the keyword or operator s.
func (p *parser) is(s string) bool { return isTok(p.cur(), s) }

func isTok(t token, s string) bool {
	return (t.kind == tPunct || t.kind == tWord && !t.escaped) && t.text == s
}

func (p *parser) errAt(t token, msg string) error {
	return &SyntaxError{Pos: t.pos, Token: t.src, Msg: msg}
}

func (p *parser) expect(s string) error {
	if !p.is(s) {
		return p.errAt(p.cur(), fmt.Sprintf("expected %q", s))
	}
	p.next()
	return nil
}

// enter bounds the nesting depth, so hostile input cannot exhaust the stack.
func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errAt(p.cur(), fmt.Sprintf("nesting deeper than %d", MaxDepth))
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func (p *parser) parse() (*bnode, error) {
	n, _, err := p.expr(qual{})
	if err != nil {
		return nil, err
	}
	if p.cur().kind != tEOF {
		t := p.cur()
		if p.is(")") {
			return nil, p.errAt(t, "unbalanced parenthesis")
		}
		if t.kind == tWord && !t.escaped && !isReserved(t.text) {
			if s := suggest(t.text); s != "" {
				return nil, p.errAt(t, fmt.Sprintf("unknown keyword; did you mean %q?", s))
			}
		}
		return nil, p.errAt(p.cur(), "expected \"and\" or \"or\"")
	}
	return n, nil
}

// expr: term { (and|or) (term | id) }, left to right with equal
// precedence, as pcap-filter(7) specifies.
func (p *parser) expr(ctx qual) (*bnode, qual, error) {
	n, q, err := p.term(ctx)
	if err != nil {
		return nil, q, err
	}
	for p.is("and") || p.is("or") {
		isAnd := p.next().text == "and"
		var m *bnode
		if p.bareIDAhead() {
			if t := p.cur(); !q.valid {
				if s := suggest(t.text); t.kind == tWord && !t.escaped && s != "" {
					return nil, q, p.errAt(t, fmt.Sprintf("unknown keyword; did you mean %q?", s))
				}
				return nil, q, p.errAt(t, "a bare value needs a qualifier (e.g. \"host\", \"port\") and there is none to repeat")
			}
			m, err = p.id(q)
		} else {
			m, q, err = p.term(q)
		}
		if err != nil {
			return nil, q, err
		}
		if isAnd {
			n = and(n, m)
		} else {
			n = or(n, m)
		}
	}
	return n, q, nil
}

// term: not term | rterm.
func (p *parser) term(ctx qual) (*bnode, qual, error) {
	if p.is("not") {
		if err := p.enter(); err != nil {
			return nil, ctx, err
		}
		defer p.leave()
		p.next()
		n, q, err := p.term(ctx)
		if err != nil {
			return nil, q, err
		}
		return not(n), q, nil
	}
	return p.rterm(ctx)
}

var arithOps = map[string]bool{
	"+": true, "-": true, "*": true, "/": true, "%": true, "&": true, "|": true, "^": true,
	"<<": true, ">>": true, "=": true, "!=": true, "<": true, ">": true, "<=": true, ">=": true,
}

// isArithOp reports whether t continues an arithmetic expression.
func isArithOp(t token) bool { return t.kind == tPunct && arithOps[t.text] }

// closeParen returns the index of the ")" matching the "(" at i, or -1.
func (p *parser) closeParen(i int) int {
	depth := 0
	for j := i; j < len(p.toks); j++ {
		switch {
		case isTok(p.toks[j], "("):
			depth++
		case isTok(p.toks[j], ")"):
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

// parenIsArith reports whether the parenthesis at the current token
// groups an arithmetic expression ("(ip[0] & 0xf) = 5").
func (p *parser) parenIsArith() bool {
	c := p.closeParen(p.i)
	return c >= 0 && c+1 < len(p.toks) && isArithOp(p.toks[c+1])
}

// bareIDAhead reports whether a bare value (inheriting qualifiers)
// follows: an address, a number that does not start arithmetic, a name,
// or a parenthesised list of those, possibly after "not".
func (p *parser) bareIDAhead() bool {
	j := p.i
	for j < len(p.toks) && (isTok(p.toks[j], "not") || isTok(p.toks[j], "(")) {
		if j-p.i > MaxDepth {
			return false // too deep anyway; stop before scanning is quadratic
		}
		if isTok(p.toks[j], "(") {
			save := p.i
			p.i = j
			arith := p.parenIsArith()
			p.i = save
			if arith {
				return false
			}
		}
		j++
	}
	if j >= len(p.toks) {
		return false
	}
	t := p.toks[j]
	switch t.kind {
	case tV4, tV6, tMAC:
		return true
	case tNum:
		return j+1 < len(p.toks) && !isArithOp(p.toks[j+1]) && !isTok(p.toks[j+1], "[")
	case tWord:
		if t.escaped {
			return true
		}
		_, isConst := constNames[t.text]
		return !isReserved(t.text) && !isConst
	}
	return false
}

// rterm is one primitive, a parenthesised expression or a relation.
func (p *parser) rterm(ctx qual) (*bnode, qual, error) {
	t := p.cur()
	none := qual{}
	switch t.kind {
	case tEOF:
		return nil, none, p.errAt(t, "expected a primitive")
	case tNum:
		n, err := p.relation()
		return n, none, err
	case tV4, tV6, tMAC:
		return nil, none, p.errAt(t, fmt.Sprintf("an address needs a qualifier, e.g. \"host %s\"", t.src))
	case tPunct:
		switch t.text {
		case "(":
			if p.parenIsArith() {
				n, err := p.relation()
				return n, none, err
			}
			if err := p.enter(); err != nil {
				return nil, none, err
			}
			defer p.leave()
			p.next()
			n, _, err := p.expr(ctx)
			if err != nil {
				return nil, none, err
			}
			if err := p.expect(")"); err != nil {
				return nil, none, err
			}
			return n, ctx, nil // pcap: the qualifiers before the parenthesis carry on
		case "-":
			n, err := p.relation()
			return n, none, err
		}
		return nil, none, p.errAt(t, "expected a primitive")
	}
	if t.escaped {
		return nil, none, p.errAt(t, "a name needs a qualifier, e.g. \"proto "+t.src+"\"")
	}
	w := t.text
	if pr, ok := protoNames[w]; ok {
		nt := p.peek(1)
		switch {
		case isTok(nt, "["):
			n, err := p.relation()
			return n, none, err
		case isTok(nt, "src") || isTok(nt, "dst") || isTok(nt, "host") || isTok(nt, "net") ||
			isTok(nt, "port") || isTok(nt, "portrange") || isTok(nt, "proto"):
			p.next()
			return p.head(pr)
		case isTok(nt, "broadcast") || isTok(nt, "multicast"):
			p.next()
			n, err := p.castTest(pr, p.next())
			return n, none, err
		case nt.kind == tWord && unsupported[nt.text]:
			return nil, none, p.errAt(nt, fmt.Sprintf("%q is not supported", nt.text))
		}
		p.next()
		n, err := p.abbrev(pr, w)
		return n, none, err
	}
	switch w {
	case "src", "dst", "host", "net", "port", "portrange", "proto":
		return p.head(pDefault)
	case "len":
		n, err := p.relation()
		return n, none, err
	case "less", "greater":
		p.next()
		v := p.cur()
		if v.kind != tNum {
			return nil, none, p.errAt(v, fmt.Sprintf("%q needs a number", w))
		}
		p.next()
		if w == "less" {
			return not(leaf(jmpJGT, v.num, insLen)), none, nil
		}
		return leaf(jmpJGE, v.num, insLen), none, nil
	case "broadcast", "multicast":
		n, err := p.castTest(pDefault, p.next())
		return n, none, err
	case "vlan":
		p.next()
		if v := p.cur(); v.kind == tNum {
			p.next()
			n, err := p.vlanTest(v.num, true)
			return n, none, err
		}
		n, err := p.vlanTest(0, false)
		return n, none, err
	case "inbound", "outbound":
		p.next()
		out := leaf(jmpJEQ, packetOutgoing, ldAbs(szW, ancillaryPktType))
		if w == "inbound" {
			return not(out), none, nil
		}
		return out, none, nil
	}
	if _, ok := constNames[w]; ok {
		n, err := p.relation()
		return n, none, err
	}
	if unsupported[w] {
		return nil, none, p.errAt(t, fmt.Sprintf("%q is not supported", w))
	}
	if keywords[w] {
		return nil, none, p.errAt(t, fmt.Sprintf("%q cannot start a primitive here", w))
	}
	if _, ok := iana.LookupService(w); ok {
		return nil, none, p.errAt(t, fmt.Sprintf("a name needs a qualifier, e.g. \"port %s\"", w))
	}
	msg := "unknown keyword"
	if s := suggest(w); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return nil, none, p.errAt(t, msg)
}

// castTest is [ether|ip|ip6] broadcast|multicast.
func (p *parser) castTest(pr proto, kw token) (*bnode, error) {
	nl := p.nl()
	switch {
	case pr == pIP && kw.text == "broadcast":
		return and(p.ipv4(), or(leaf(jmpJEQ, 0, ldAbs(szW, nl+16)), leaf(jmpJEQ, 0xffffffff, ldAbs(szW, nl+16)))), nil
	case pr == pIP:
		return and(p.ipv4(), leaf(jmpJGE, 224, ldAbs(szB, nl+16))), nil
	case pr == pIP6 && kw.text == "multicast":
		return and(p.ipv6(), leaf(jmpJEQ, 0xff, ldAbs(szB, nl+24))), nil
	case pr == pDefault || pr == pLink:
		if p.link != LinkEthernet {
			return nil, p.errAt(kw, fmt.Sprintf("link-layer %s needs an Ethernet link; use \"ip %s\" on link type %v", kw.text, kw.text, p.link))
		}
		if kw.text == "broadcast" {
			return ether6(0, [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), nil
		}
		return leaf(jmpJSET, 1, ldAbs(szB, 0)), nil
	}
	return nil, p.errAt(kw, fmt.Sprintf("%s is not defined for '%v'", kw.text, pr))
}

// head parses the direction and address qualifiers after an optional
// protocol, then the value they apply to.
func (p *parser) head(pr proto) (*bnode, qual, error) {
	q := qual{proto: pr, valid: true}
	if p.is("proto") {
		p.next()
		q.addr = aProto
	} else {
		if p.is("src") || p.is("dst") {
			first := p.next().text
			q.dir = dSrc
			if first == "dst" {
				q.dir = dDst
			}
			other := "dst"
			if first == "dst" {
				other = "src"
			}
			if (p.is("or") || p.is("and")) && isTok(p.peek(1), other) {
				q.dir = dOr
				if p.next().text == "and" {
					q.dir = dAnd
				}
				p.next()
			}
		}
		switch {
		case p.is("host"):
			q.addr = aHost
		case p.is("net"):
			q.addr = aNet
		case p.is("port"):
			q.addr = aPort
		case p.is("portrange"):
			q.addr = aPortrange
		}
		if q.addr != aDefault {
			p.next()
		}
	}
	if t := p.cur(); t.kind == tWord && unsupported[t.text] {
		return nil, q, p.errAt(t, fmt.Sprintf("%q is not supported", t.text))
	}
	n, err := p.id(q)
	return n, q, err
}

// id parses a value, "not value" or a parenthesised and/or list of values,
// all under the qualifiers q.
func (p *parser) id(q qual) (*bnode, error) {
	t := p.cur()
	if isTok(t, "not") || isTok(t, "(") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		p.next()
		if t.text == "not" {
			n, err := p.id(q)
			if err != nil {
				return nil, err
			}
			return not(n), nil
		}
		n, err := p.id(q)
		if err != nil {
			return nil, err
		}
		for p.is("and") || p.is("or") {
			isAnd := p.next().text == "and"
			m, err := p.id(q)
			if err != nil {
				return nil, err
			}
			if isAnd {
				n = and(n, m)
			} else {
				n = or(n, m)
			}
		}
		return n, p.expect(")")
	}
	p.next()
	return p.value(q, t)
}
