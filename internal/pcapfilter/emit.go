package pcapfilter

import "slices"

// bkind is the kind of a boolean IR node.
type bkind uint8

const (
	bTrue bkind = iota
	bFalse
	bLeaf // straight-line code, then a conditional jump
	bAnd
	bOr
	bNot
)

// bnode is the boolean IR: tests combined with short-circuit and/or/not.
// A leaf runs pre (loads and arithmetic, no jumps) and then the
// conditional jump jop #k (or jop x); the jump's "true" means the leaf is
// true.
type bnode struct {
	kind bkind
	l, r *bnode
	pre  []Instruction
	jop  uint16
	k    uint32
}

var (
	nodeTrue  = &bnode{kind: bTrue}
	nodeFalse = &bnode{kind: bFalse}
)

func leaf(jop uint16, k uint32, pre ...Instruction) *bnode {
	return &bnode{kind: bLeaf, pre: pre, jop: clsJMP | jop, k: k}
}

// and, or and not simplify constants only where that cannot skip a load
// that might fault (a constant on the left, or true/false passing through).
func and(a, b *bnode) *bnode {
	switch {
	case a.kind == bTrue:
		return b
	case a.kind == bFalse:
		return a
	case b.kind == bTrue:
		return a
	}
	return &bnode{kind: bAnd, l: a, r: b}
}

func or(a, b *bnode) *bnode {
	switch {
	case a.kind == bTrue:
		return a
	case a.kind == bFalse:
		return b
	case b.kind == bFalse:
		return a
	}
	return &bnode{kind: bOr, l: a, r: b}
}

func not(a *bnode) *bnode {
	switch a.kind {
	case bTrue:
		return nodeFalse
	case bFalse:
		return nodeTrue
	case bNot:
		return a.l
	}
	return &bnode{kind: bNot, l: a}
}

// item is one entry of the program under construction: an instruction
// whose jumps name labels, or the place of a label.
type item struct {
	ins     Instruction
	isLabel bool
	label   int // label placed here (isLabel)
	jt, jf  int // target labels of a conditional jump; jt alone for ja
	tramp   int // target label + 1 if this instruction is a trampoline
}

func isCondJump(op uint16) bool { return op&0x07 == clsJMP && op&0xf0 != jmpJA }
func isJA(op uint16) bool       { return op == clsJMP|jmpJA }
func isRet(op uint16) bool      { return op&0x07 == clsRET }

// asm lays out the IR as a program.
type asm struct {
	items    []item
	nlabels  int
	refFrom  []int  // per label: item index of its first reference, -1 if none
	refMulti []bool // per label: referenced from more than one item
	lastPre  []Instruction
	lastJump int // item index of the last leaf's jump, -1 after anything else
	ninsns   int
}

func (a *asm) newLabel() int {
	a.nlabels++
	a.refFrom = append(a.refFrom, -1)
	a.refMulti = append(a.refMulti, false)
	return a.nlabels - 1
}

func (a *asm) ref(l, from int) {
	switch a.refFrom[l] {
	case -1:
		a.refFrom[l] = from
	case from:
	default:
		a.refMulti[l] = true
	}
}

func (a *asm) place(l int) { a.items = append(a.items, item{isLabel: true, label: l}) }

func (a *asm) add(ins Instruction) error {
	a.items = append(a.items, item{ins: ins})
	a.ninsns++
	if a.ninsns > 8*MaxInstructions { // bound memory; the exact check comes later
		return ErrTooLong
	}
	return nil
}

func (a *asm) jump(op uint16, k uint32, t, f int) error {
	if err := a.add(Instruction{Op: op, K: k}); err != nil {
		return err
	}
	i := len(a.items) - 1
	a.items[i].jt, a.items[i].jf = t, f
	a.ref(t, i)
	if !isJA(op) {
		a.ref(f, i)
	}
	return nil
}

// canReuse reports whether the registers already hold what pre computes:
// the previous leaf ran the same code and the only way here is a jump
// from that leaf (jumps leave A, X and scratch memory untouched). This
// removes the repeated "ldh [12]" of "ip or ip6" and similar chains.
func (a *asm) canReuse(pre []Instruction) bool {
	if a.lastJump < 0 || !slices.Equal(pre, a.lastPre) {
		return false
	}
	for _, it := range a.items[a.lastJump+1:] {
		if !it.isLabel || a.refMulti[it.label] || a.refFrom[it.label] != a.lastJump {
			return false
		}
	}
	return len(a.items) > a.lastJump+1
}

// emit generates code for n that continues at label t when n is true and
// at label f when it is false.
func (a *asm) emit(n *bnode, t, f int) error {
	switch n.kind {
	case bTrue, bFalse:
		target := t
		if n.kind == bFalse {
			target = f
		}
		a.lastJump = -1
		return a.jump(clsJMP|jmpJA, 0, target, target)
	case bNot:
		return a.emit(n.l, f, t)
	case bAnd, bOr:
		m := a.newLabel()
		var err error
		if n.kind == bAnd {
			err = a.emit(n.l, m, f)
		} else {
			err = a.emit(n.l, t, m)
		}
		if err != nil {
			return err
		}
		a.place(m)
		return a.emit(n.r, t, f)
	}
	if !a.canReuse(n.pre) {
		for _, ins := range n.pre {
			if err := a.add(ins); err != nil {
				return err
			}
		}
	}
	if err := a.jump(n.jop, n.k, t, f); err != nil {
		return err
	}
	a.lastPre, a.lastJump = n.pre, len(a.items)-1
	return nil
}

// assemble turns the IR into a program returning snaplen for accepted
// frames and 0 for rejected ones.
func assemble(root *bnode, snaplen uint32) ([]Instruction, error) {
	a := &asm{lastJump: -1}
	accept, reject := a.newLabel(), a.newLabel()
	if err := a.emit(root, accept, reject); err != nil {
		return nil, err
	}
	a.place(accept)
	a.items = append(a.items, item{ins: Instruction{Op: clsRET | retK, K: snaplen}})
	a.place(reject)
	a.items = append(a.items, item{ins: Instruction{Op: clsRET | retK, K: 0}})
	for range 8 { // each pass ends with dead-code removal; later passes only polish
		if !a.simplify() {
			break
		}
	}
	if a.count() > MaxInstructions {
		return nil, ErrTooLong
	}
	if err := a.trampolines(); err != nil {
		return nil, err
	}
	return a.resolve(), nil
}

// count is the number of instructions.
func (a *asm) count() int {
	n := 0
	for _, it := range a.items {
		if !it.isLabel {
			n++
		}
	}
	return n
}

// targets maps each label to the item index of the instruction it marks.
func (a *asm) targets() []int {
	t := make([]int, a.nlabels)
	next := len(a.items)
	for i := len(a.items) - 1; i >= 0; i-- {
		if a.items[i].isLabel {
			t[a.items[i].label] = next
		} else {
			next = i
		}
	}
	return t
}

// simplify removes jumps to the next instruction, replaces jumps to a
// return with the return itself, and deletes unreachable instructions. It
// reports whether it changed anything.
func (a *asm) simplify() bool {
	changed := false
	tgt := a.targets()
	for i := range a.items {
		it := &a.items[i]
		if it.isLabel || !isJA(it.ins.Op) {
			continue
		}
		dest := tgt[it.jt]
		if dest < len(a.items) && isRet(a.items[dest].ins.Op) {
			it.ins = a.items[dest].ins
			changed = true
			continue
		}
		next := i + 1
		for next < len(a.items) && a.items[next].isLabel {
			next++
		}
		if dest == next {
			it.isLabel, it.label = true, a.newLabel() // a harmless unused label
			tgt = append(tgt, 0)
			changed = true
		}
	}
	// Reachability: every jump is forward, so one pass in order suffices.
	reach := make([]bool, len(a.items))
	first := 0
	for first < len(a.items) && a.items[first].isLabel {
		first++
	}
	if first < len(a.items) {
		reach[first] = true
	}
	live := make([]bool, a.nlabels)
	fall := false
	for i, it := range a.items {
		if it.isLabel {
			if live[it.label] {
				fall = true
			}
			continue
		}
		if fall {
			reach[i] = true
		}
		if !reach[i] {
			continue
		}
		switch {
		case isRet(it.ins.Op):
			fall = false
		case isJA(it.ins.Op):
			live[it.jt], fall = true, false
		case isCondJump(it.ins.Op):
			live[it.jt], live[it.jf], fall = true, true, false
		default:
			fall = true
		}
	}
	out := a.items[:0]
	for i, it := range a.items {
		if it.isLabel || reach[i] {
			out = append(out, it)
		} else {
			changed = true
		}
	}
	a.items = out
	return changed
}

// positions returns, per item, its instruction index, and per label the
// index of the instruction it marks.
func (a *asm) positions() (insIdx, labelPos []int) {
	insIdx = make([]int, len(a.items))
	labelPos = make([]int, a.nlabels)
	n := 0
	for i, it := range a.items {
		insIdx[i] = n
		if it.isLabel {
			labelPos[it.label] = n
		} else {
			n++
		}
	}
	return insIdx, labelPos
}

// trampolines makes every conditional jump reach its target within 255
// instructions, by sending a far branch to a nearby "ja target" (or a copy
// of the target's "ret") placed right after some conditional jump, where
// nothing falls through.
func (a *asm) trampolines() error {
	for {
		insIdx, labelPos := a.positions()
		inserted := false
		for i := 0; i < len(a.items) && !inserted; i++ {
			it := a.items[i]
			if it.isLabel || !isCondJump(it.ins.Op) {
				continue
			}
			p := insIdx[i]
			for _, br := range []*int{&a.items[i].jt, &a.items[i].jf} {
				if labelPos[*br]-p-1 <= 255 {
					continue
				}
				n := len(a.items)
				*br = a.trampoline(i, p, *br, insIdx)
				if len(a.items) != n {
					inserted = true // positions moved: recompute them
					break
				}
			}
		}
		if !inserted {
			return nil
		}
		if a.count() > MaxInstructions {
			return ErrTooLong
		}
	}
}

// trampoline returns a label within reach of the jump at item i
// (instruction p) that leads to label target. It reuses a trampoline in
// reach, or inserts one as far ahead as possible (so later jumps can share
// it) right after an instruction that never falls through.
func (a *asm) trampoline(i, p, target int, insIdx []int) int {
	at := i + 1 // insertion item index; right after the jump itself is always valid
	for j := i + 1; j < len(a.items) && insIdx[j] <= p+255; j++ {
		it := a.items[j]
		if it.isLabel {
			continue
		}
		if it.tramp == target+1 && a.items[j-1].isLabel {
			return a.items[j-1].label
		}
		if isRet(it.ins.Op) || isJA(it.ins.Op) || isCondJump(it.ins.Op) {
			at = j + 1
		}
	}
	tgt := a.targets()
	ins := Instruction{Op: clsJMP | jmpJA}
	if d := tgt[target]; d < len(a.items) && isRet(a.items[d].ins.Op) {
		ins = a.items[d].ins // a copy of the return needs no jump at all
	}
	l := a.newLabel()
	tr := item{ins: ins, jt: target, jf: target, tramp: target + 1}
	a.items = slices.Insert(a.items, at, item{isLabel: true, label: l}, tr)
	return l
}

// resolve converts label references to jump offsets.
func (a *asm) resolve() []Instruction {
	insIdx, labelPos := a.positions()
	prog := make([]Instruction, 0, a.count())
	for i, it := range a.items {
		if it.isLabel {
			continue
		}
		ins := it.ins
		p := insIdx[i]
		switch {
		case isJA(ins.Op):
			ins.K = uint32(labelPos[it.jt] - p - 1)
		case isCondJump(ins.Op):
			ins.Jt = uint8(labelPos[it.jt] - p - 1)
			ins.Jf = uint8(labelPos[it.jf] - p - 1)
		}
		prog = append(prog, ins)
	}
	return prog
}
