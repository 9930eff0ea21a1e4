package pcapfilter

import (
	"errors"
	"fmt"
)

// validOps is the set of opcodes the kernel accepts in classic BPF socket
// filters (the codes table of bpf_check_classic, net/core/filter.c).
var validOps = func() map[uint16]bool {
	m := map[uint16]bool{}
	for _, op := range []uint16{aluADD, aluSUB, aluMUL, aluDIV, aluMOD, aluAND, aluOR, aluXOR, aluLSH, aluRSH} {
		m[clsALU|op|srcK] = true
		m[clsALU|op|srcX] = true
	}
	m[clsALU|aluNEG] = true
	for _, sz := range []uint16{szW, szH, szB} {
		m[clsLD|sz|modeABS] = true
		m[clsLD|sz|modeIND] = true
	}
	for _, op := range []uint16{
		clsLD | szW | modeLEN, clsLD | modeIMM, clsLD | modeMEM,
		clsLDX | szW | modeLEN, clsLDX | szB | modeMSH, clsLDX | modeIMM, clsLDX | modeMEM,
		clsST, clsSTX, clsMISC | miscTAX, clsMISC | miscTXA, clsRET | retK, clsRET | retA,
		clsJMP | jmpJA,
	} {
		m[op] = true
	}
	for _, op := range []uint16{jmpJEQ, jmpJGT, jmpJGE, jmpJSET} {
		m[clsJMP|op|srcK] = true
		m[clsJMP|op|srcX] = true
	}
	return m
}()

// Validate checks a program the way the kernel's bpf_check_classic does
// before SO_ATTACH_FILTER accepts it: length 1..4096, known opcodes, no
// division or modulo by constant 0, constant shifts below 32, scratch
// memory indexes below 16 and never read before written on any path, known
// ancillary loads only, every jump inside the program, and a return as the
// last instruction.
func Validate(prog []Instruction) error {
	n := len(prog)
	if n == 0 {
		return errors.New("bpf: empty program")
	}
	if n > MaxInstructions {
		return ErrTooLong
	}
	for pc, ins := range prog {
		bad := func(why string) error { return fmt.Errorf("bpf: instruction %d (%v): %s", pc, ins, why) }
		if !validOps[ins.Op] {
			return bad("unknown opcode")
		}
		switch ins.Op {
		case clsALU | aluDIV | srcK, clsALU | aluMOD | srcK:
			if ins.K == 0 {
				return bad("division by zero")
			}
		case clsALU | aluLSH | srcK, clsALU | aluRSH | srcK:
			if ins.K >= 32 {
				return bad("shift by 32 or more")
			}
		case clsLD | modeMEM, clsLDX | modeMEM, clsST, clsSTX:
			if ins.K >= memWords {
				return bad("scratch memory index out of range")
			}
		case clsLD | szW | modeABS, clsLD | szH | modeABS, clsLD | szB | modeABS:
			if ins.K >= skfAdOff && (ins.K-skfAdOff >= adMax || (ins.K-skfAdOff)%4 != 0) {
				return bad("unknown ancillary load")
			}
		case clsJMP | jmpJA:
			if ins.K >= uint32(n-pc-1) {
				return bad("jump out of range")
			}
		}
		if isCondJump(ins.Op) && (pc+int(ins.Jt)+1 >= n || pc+int(ins.Jf)+1 >= n) {
			return bad("jump out of range")
		}
	}
	if !isRet(prog[n-1].Op) {
		return fmt.Errorf("bpf: last instruction (%v) is not a return", prog[n-1])
	}
	return checkMemory(prog)
}

// checkMemory rejects loads of scratch memory that some path reaches
// without a store first (the kernel's check_load_and_stores). Jumps only go
// forward, so one pass in order sees every predecessor first.
func checkMemory(prog []Instruction) error {
	valid := make([]uint16, len(prog)) // memory words stored on every path to pc
	seen := make([]bool, len(prog))
	seen[0] = true
	meet := func(pc int, v uint16) {
		if !seen[pc] {
			valid[pc], seen[pc] = v, true
		} else {
			valid[pc] &= v
		}
	}
	for pc, ins := range prog {
		if !seen[pc] {
			continue // unreachable: the kernel does not look at it either
		}
		v := valid[pc]
		switch ins.Op {
		case clsST, clsSTX:
			v |= 1 << ins.K
		case clsLD | modeMEM, clsLDX | modeMEM:
			if v&(1<<ins.K) == 0 {
				return fmt.Errorf("bpf: instruction %d (%v): scratch memory M[%d] read before written", pc, ins, ins.K)
			}
		}
		switch {
		case isRet(ins.Op):
		case isJA(ins.Op):
			meet(pc+1+int(ins.K), v)
		case isCondJump(ins.Op):
			meet(pc+1+int(ins.Jt), v)
			meet(pc+1+int(ins.Jf), v)
		default:
			meet(pc+1, v)
		}
	}
	return nil
}
