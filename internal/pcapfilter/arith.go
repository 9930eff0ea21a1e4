package pcapfilter

import "fmt"

// akind is the kind of an arithmetic expression node.
type akind uint8

const (
	aConst akind = iota
	aLen
	aLoad
	aBin
	aNeg
)

// anode is an arithmetic expression: a constant, the packet length, a
// packet load (with its protocol check) or an operation.
type anode struct {
	kind  akind
	tok   token // for error messages
	k     uint32
	op    uint16 // aluADD... for aBin
	l, r  *anode // operands; l is the index of an aLoad
	size  uint16 // szB, szH or szW for aLoad
	check *bnode // protocol check of an aLoad
	base  uint32
	trans bool // aLoad: offset relative to the IPv4 header length
}

// Binary precedence levels (higher binds tighter), as in pcap's grammar.
var binPrec = map[string]int{"|": 1, "&": 2, "<<": 3, ">>": 3, "+": 4, "-": 4, "*": 5, "/": 5}

var binOp = map[string]uint16{
	"|": aluOR, "&": aluAND, "<<": aluLSH, ">>": aluRSH, "+": aluADD, "-": aluSUB,
	"*": aluMUL, "/": aluDIV, "%": aluMOD, "^": aluXOR,
}

// relation parses "arith relop arith" and generates its test: the
// protocol checks of every load first (a failed check makes the relation
// false), then the comparison.
func (p *parser) relation() (*bnode, error) {
	l, err := p.arith(0)
	if err != nil {
		return nil, err
	}
	opTok := p.cur()
	var jop uint16
	negate := false
	switch {
	case isTok(opTok, "="):
		jop = jmpJEQ
	case isTok(opTok, "!="):
		jop, negate = jmpJEQ, true
	case isTok(opTok, ">"):
		jop = jmpJGT
	case isTok(opTok, "<="):
		jop, negate = jmpJGT, true
	case isTok(opTok, ">="):
		jop = jmpJGE
	case isTok(opTok, "<"):
		jop, negate = jmpJGE, true
	default:
		return nil, p.errAt(opTok, "expected a comparison (=, !=, <, <=, >, >=)")
	}
	p.next()
	r, err := p.arith(0)
	if err != nil {
		return nil, err
	}
	var checks []*bnode
	collectChecks(l, &checks)
	collectChecks(r, &checks)
	var test *bnode
	if r.kind == aConst {
		pre, err := p.code(l, 0, nil)
		if err != nil {
			return nil, err
		}
		test = leaf(jop, r.k, pre...)
	} else {
		pre, err := p.code(l, 0, nil)
		if err != nil {
			return nil, err
		}
		pre = append(pre, Instruction{Op: clsST, K: 0})
		if pre, err = p.code(r, 1, pre); err != nil {
			return nil, err
		}
		pre = append(pre, insTAX, Instruction{Op: clsLD | modeMEM, K: 0})
		test = &bnode{kind: bLeaf, pre: pre, jop: clsJMP | jop | srcX}
	}
	if negate {
		test = not(test)
	}
	n := nodeTrue
	for _, c := range checks {
		n = and(n, c)
	}
	return and(n, test), nil
}

// collectChecks appends the protocol checks of the loads in a, in
// evaluation order, without duplicates.
func collectChecks(a *anode, out *[]*bnode) {
	if a == nil {
		return
	}
	collectChecks(a.l, out)
	collectChecks(a.r, out)
	if a.kind != aLoad || a.check.kind == bTrue {
		return
	}
	for _, c := range *out {
		if c == a.check {
			return
		}
	}
	*out = append(*out, a.check)
}

// arith parses a binary expression by precedence climbing.
func (p *parser) arith(minPrec int) (*anode, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.cur()
		prec, ok := binPrec[t.text]
		if t.kind != tPunct || !ok || prec <= minPrec {
			return l, nil
		}
		p.next()
		r, err := p.arith(prec)
		if err != nil {
			return nil, err
		}
		if l, err = p.bin(t, binOp[t.text], l, r); err != nil {
			return nil, err
		}
	}
}

// unary parses "-x" and an operand followed by '%' or '^'. pcap's grammar
// gives '%' and '^' no precedence, so yacc always shifts them: they take
// the operand just before them and everything after them.
func (p *parser) unary() (*anode, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if t := p.cur(); isTok(t, "-") {
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		if x.kind == aConst {
			return &anode{kind: aConst, tok: t, k: -x.k}, nil
		}
		return &anode{kind: aNeg, tok: t, l: x}, nil
	}
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	if t := p.cur(); isTok(t, "%") || isTok(t, "^") {
		p.next()
		r, err := p.arith(0)
		if err != nil {
			return nil, err
		}
		return p.bin(t, binOp[t.text], x, r)
	}
	return x, nil
}

// bin builds a binary node, folding constants and rejecting what the
// kernel would (division by constant zero, shifts of 32 or more).
func (p *parser) bin(t token, op uint16, l, r *anode) (*anode, error) {
	if r.kind == aConst {
		switch {
		case (op == aluDIV || op == aluMOD) && r.k == 0:
			return nil, p.errAt(t, "division by zero")
		case (op == aluLSH || op == aluRSH) && r.k > 31:
			return nil, p.errAt(t, "shift by more than 31 bits")
		}
		if l.kind == aConst {
			return &anode{kind: aConst, tok: t, k: fold(op, l.k, r.k)}, nil
		}
	}
	return &anode{kind: aBin, tok: t, op: op, l: l, r: r}, nil
}

func fold(op uint16, a, b uint32) uint32 {
	switch op {
	case aluADD:
		return a + b
	case aluSUB:
		return a - b
	case aluMUL:
		return a * b
	case aluDIV:
		return a / b
	case aluMOD:
		return a % b
	case aluAND:
		return a & b
	case aluOR:
		return a | b
	case aluXOR:
		return a ^ b
	case aluLSH:
		return a << b
	}
	return a >> b
}

// primary parses a number, named constant, len, a parenthesised
// expression or proto[index(:size)].
func (p *parser) primary() (*anode, error) {
	t := p.cur()
	switch {
	case t.kind == tNum:
		p.next()
		return &anode{kind: aConst, tok: t, k: t.num}, nil
	case isTok(t, "("):
		p.next()
		x, err := p.arith(0)
		if err != nil {
			return nil, err
		}
		return x, p.expect(")")
	case isTok(t, "len"):
		p.next()
		return &anode{kind: aLen, tok: t}, nil
	case t.kind == tWord && !t.escaped:
		if v, ok := constNames[t.text]; ok {
			p.next()
			return &anode{kind: aConst, tok: t, k: v}, nil
		}
		if pr, ok := protoNames[t.text]; ok && isTok(p.peek(1), "[") {
			return p.load(pr)
		}
	}
	return nil, p.errAt(t, "expected a number, len or proto[offset]")
}

// load parses proto[index] or proto[index:size].
func (p *parser) load(pr proto) (*anode, error) {
	t := p.next()
	p.next() // "["
	check, base, trans, err := p.loadBase(pr, t)
	if err != nil {
		return nil, err
	}
	idx, err := p.arith(0)
	if err != nil {
		return nil, err
	}
	size := uint16(szB)
	if p.is(":") {
		p.next()
		st := p.next()
		switch {
		case st.kind == tNum && st.num == 1:
		case st.kind == tNum && st.num == 2:
			size = szH
		case st.kind == tNum && st.num == 4:
			size = szW
		default:
			return nil, p.errAt(st, "data size must be 1, 2, or 4")
		}
	}
	if err := p.expect("]"); err != nil {
		return nil, err
	}
	if idx.kind == aConst && uint64(base)+uint64(idx.k) >= 1<<31 {
		return nil, p.errAt(idx.tok, "offset out of range")
	}
	return &anode{kind: aLoad, tok: t, l: idx, size: size, check: check, base: base, trans: trans}, nil
}

// code appends instructions leaving the value of a in A. Scratch slots
// from slot up are free to use.
func (p *parser) code(a *anode, slot uint32, out []Instruction) ([]Instruction, error) {
	if slot >= memWords {
		return nil, p.errAt(a.tok, fmt.Sprintf("expression too complex (needs more than %d scratch registers)", memWords))
	}
	var err error
	switch a.kind {
	case aConst:
		return append(out, Instruction{Op: clsLD | modeIMM, K: a.k}), nil
	case aLen:
		return append(out, insLen), nil
	case aNeg:
		if out, err = p.code(a.l, slot, out); err != nil {
			return nil, err
		}
		return append(out, Instruction{Op: clsALU | aluNEG}), nil
	case aLoad:
		return p.codeLoad(a, slot, out)
	}
	l, r := a.l, a.r
	if l.kind == aConst && r.kind != aConst && (a.op == aluADD || a.op == aluMUL || a.op == aluAND || a.op == aluOR || a.op == aluXOR) {
		l, r = r, l // commutative: put the constant on the right
	}
	if out, err = p.code(l, slot, out); err != nil {
		return nil, err
	}
	if r.kind == aConst {
		return append(out, aluK(a.op, r.k)), nil
	}
	out = append(out, Instruction{Op: clsST, K: slot})
	if out, err = p.code(r, slot+1, out); err != nil {
		return nil, err
	}
	return append(out, insTAX, Instruction{Op: clsLD | modeMEM, K: slot}, Instruction{Op: clsALU | a.op | srcX}), nil
}

// codeLoad generates proto[index]: absolute or X-indexed loads, with the
// IPv4 header length (ldxb 4*([nl]&0xf)) added for transport protocols.
func (p *parser) codeLoad(a *anode, slot uint32, out []Instruction) ([]Instruction, error) {
	idx := a.l
	var err error
	switch {
	case idx.kind == aConst && !a.trans:
		return append(out, ldAbs(a.size, a.base+idx.k)), nil
	case idx.kind == aConst:
		return append(out, ldxMSH(a.base), ldInd(a.size, a.base+idx.k)), nil
	case !a.trans:
		if out, err = p.code(idx, slot, out); err != nil {
			return nil, err
		}
		return append(out, insTAX, ldInd(a.size, a.base)), nil
	}
	if out, err = p.code(idx, slot, out); err != nil {
		return nil, err
	}
	return append(out,
		Instruction{Op: clsST, K: slot},
		ldxMSH(a.base),
		Instruction{Op: clsLD | modeMEM, K: slot},
		Instruction{Op: clsALU | aluADD | srcX},
		insTAX,
		ldInd(a.size, a.base)), nil
}
