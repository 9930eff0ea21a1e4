package query

import "github.com/weir-dev/weir/internal/store"

// evaluator holds one goroutine's scratch selection vectors, reused from
// block to block so that filtering does not allocate.
type evaluator struct {
	free [][]bool
	fam  []uint8 // addrSet's families per dictionary entry
}

func (e *evaluator) get(n int) []bool {
	if k := len(e.free); k > 0 {
		s := e.free[k-1]
		e.free = e.free[:k-1]
		if cap(s) >= n {
			return s[:n]
		}
	}
	return make([]bool, n)
}

func (e *evaluator) put(s []bool) { e.free = append(e.free, s) }

// filter evaluates c over the block into sel (len c.N); nil c selects all.
func (e *evaluator) filter(c *Condition, cols *store.Columns, sel []bool) {
	if c == nil {
		for i := range sel {
			sel[i] = true
		}
		return
	}
	c.root.eval(cols, sel, e)
}

func (n *andNode) eval(c *store.Columns, sel []bool, e *evaluator) {
	n.l.eval(c, sel, e)
	tmp := e.get(len(sel))
	n.r.eval(c, tmp, e)
	for i, t := range tmp {
		sel[i] = sel[i] && t
	}
	e.put(tmp)
}

func (n *orNode) eval(c *store.Columns, sel []bool, e *evaluator) {
	if n.set != nil {
		n.set.eval(c, sel, e)
		return
	}
	n.l.eval(c, sel, e)
	tmp := e.get(len(sel))
	n.r.eval(c, tmp, e)
	for i, t := range tmp {
		sel[i] = sel[i] || t
	}
	e.put(tmp)
}

func (n *notNode) eval(c *store.Columns, sel []bool, e *evaluator) {
	n.x.eval(c, sel, e)
	for i := range sel {
		sel[i] = !sel[i]
	}
}

func (l *leaf) eval(c *store.Columns, sel []bool, e *evaluator) {
	switch l.attr {
	case aIface:
		m := l.op.test(boolU(c.Iface == l.str), 1)
		for i := range sel {
			sel[i] = m
		}
	case aSrcAddr:
		l.evalAddr(c.SrcDict, c.SrcIdx, c.SrcAddr, c.IPVersion, sel, e)
	case aDstAddr:
		l.evalAddr(c.DstDict, c.DstIdx, c.DstAddr, c.IPVersion, sel, e)
	case aAddr:
		l.evalAddr(c.SrcDict, c.SrcIdx, c.SrcAddr, c.IPVersion, sel, e)
		tmp := e.get(len(sel))
		l.evalAddr(c.DstDict, c.DstIdx, c.DstAddr, c.IPVersion, tmp, e)
		l.join(sel, tmp)
		e.put(tmp)
	case aSrcPort:
		evalNum(l.op, l.num, c.SrcPort, sel)
	case aDstPort:
		evalNum(l.op, l.num, c.DstPort, sel)
	case aPort:
		evalNum(l.op, l.num, c.SrcPort, sel)
		tmp := e.get(len(sel))
		evalNum(l.op, l.num, c.DstPort, tmp)
		l.join(sel, tmp)
		e.put(tmp)
	case aProto:
		evalNum(l.op, l.num, c.Proto, sel)
	case aVLAN:
		evalNum(l.op, l.num, c.VLAN, sel)
	case aSampling:
		evalNum(l.op, l.num, c.Sampling, sel)
	case aDropReason:
		want := l.op == opEq
		for i, r := range c.DropReason[:len(sel)] {
			sel[i] = equalFoldASCII(r, l.str) == want
		}
	case aRule:
		want := l.op == opEq
		for i, r := range c.Rule[:len(sel)] {
			sel[i] = (r == l.str) == want
		}
	case aNode:
		l.evalNode(c.Node[:len(sel)], sel)
	case aVerdict:
		evalNum(l.op, l.num, c.Verdict, sel)
	case aMark:
		evalNum(l.op, l.num, c.Mark, sel)
	case aZone:
		evalNum(l.op, l.num, c.Zone, sel)
	case aNATSrcAddr, aNATDstAddr, aNATSrcPort, aNATDstPort:
		l.evalNAT(c, sel)
	case aServiceMatch:
		evalNum(l.op, l.num, c.ServiceMatch, sel)
	default:
		if l.attr.isEnrichStr() {
			l.evalEnrich(c, sel)
		}
	}
}

// equalFoldASCII reports whether a and b are equal ignoring the case of
// ASCII letters.
func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x != y {
			if x|0x20 != y|0x20 || x|0x20 < 'a' || x|0x20 > 'z' {
				return false
			}
		}
	}
	return true
}

// join combines the two sides of an either-side leaf into sel.
func (l *leaf) join(sel, other []bool) {
	if l.all {
		for i, t := range other {
			sel[i] = sel[i] && t
		}
		return
	}
	for i, t := range other {
		sel[i] = sel[i] || t
	}
}

// evalAddr tests an address column: a block's dictionary (dict[idx[i]] is
// row i's address) one entry at a time, then each row by its entry and
// family; live records (no dictionary) row by row.
func (l *leaf) evalAddr(dict [][16]byte, idx []uint32, rows [][16]byte, ver []uint8, sel []bool, e *evaluator) {
	want := l.op == opEq
	if dict == nil {
		for i := range sel {
			sel[i] = l.addrMatch(&rows[i], ver[i]) == want
		}
		return
	}
	m := e.get(len(dict))
	for j := range dict {
		m[j] = l.prefixMatch(&dict[j])
	}
	idx, ver = idx[:len(sel)], ver[:len(sel)]
	for i, x := range idx {
		sel[i] = (m[x] && (ver[i] == 4) == l.v4) == want
	}
	e.put(m)
}

// evalNum compares a numeric column; one loop per operator keeps the
// comparison out of the row loop.
func evalNum[T uint8 | uint16 | uint32](op cmpOp, x uint64, v []T, sel []bool) {
	if x > uint64(^T(0)) { // beyond the column's range: constant answer
		all := op == opNe || op == opLt || op == opLe
		for i := range sel {
			sel[i] = all
		}
		return
	}
	t := T(x)
	v = v[:len(sel)]
	switch op {
	case opEq:
		for i := range sel {
			sel[i] = v[i] == t
		}
	case opNe:
		for i := range sel {
			sel[i] = v[i] != t
		}
	case opLt:
		for i := range sel {
			sel[i] = v[i] < t
		}
	case opLe:
		for i := range sel {
			sel[i] = v[i] <= t
		}
	case opGt:
		for i := range sel {
			sel[i] = v[i] > t
		}
	default:
		for i := range sel {
			sel[i] = v[i] >= t
		}
	}
}

// evalNode compares the rows' nodes with the leaf's (exactly). A block
// holds one node or a few in runs, and rows of a run share their string's
// bytes: a row with the previous row's node takes its result.
func (l *leaf) evalNode(nodes []string, sel []bool) {
	want := l.op == opEq
	last, lastRes := "", (l.str == "") == want
	for i, n := range nodes {
		if n != last { // one comparison of lengths (and pointers) for a run
			last, lastRes = n, (n == l.str) == want
		}
		sel[i] = lastRes
	}
}
