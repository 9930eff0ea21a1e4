package pcapfilter

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// meta is what the kernel knows about a frame besides its bytes: the
// stripped VLAN tag and the packet type, read by ancillary loads.
type meta struct {
	vlanPresent bool
	vlanTCI     uint16
	pktType     uint32
}

// run interprets a classic BPF program over a frame with the kernel's
// semantics: an out-of-bounds load or a division by X == 0 ends the
// program with 0. It returns an error for what the kernel would never run
// (bad opcode, jump out of range, running off the end), so tests can tell
// a rejection from a broken program.
func run(prog []Instruction, pkt []byte, m meta) (uint32, error) {
	var a, x uint32
	var mem [memWords]uint32
	load := func(size uint16, off uint32) (uint32, bool) {
		if off >= skfAdOff {
			switch off - skfAdOff {
			case adVLANTag:
				return uint32(m.vlanTCI), true
			case adVLANTagPresent:
				if m.vlanPresent {
					return 1, true
				}
				return 0, true
			case adPktType:
				return m.pktType, true
			}
			return 0, false
		}
		n := map[uint16]uint32{szB: 1, szH: 2, szW: 4}[size]
		if uint64(off)+uint64(n) > uint64(len(pkt)) {
			return 0, false
		}
		switch size {
		case szB:
			return uint32(pkt[off]), true
		case szH:
			return uint32(binary.BigEndian.Uint16(pkt[off:])), true
		}
		return binary.BigEndian.Uint32(pkt[off:]), true
	}
	for pc := 0; pc < len(prog); pc++ {
		ins := prog[pc]
		k := ins.K
		switch ins.Op & 0x07 {
		case clsLD, clsLDX:
			var v uint32
			mode := ins.Op & 0xe0
			switch mode {
			case modeIMM:
				v = k
			case modeLEN:
				v = uint32(len(pkt))
			case modeMEM:
				if k >= memWords {
					return 0, fmt.Errorf("pc %d: memory index %d", pc, k)
				}
				v = mem[k]
			case modeABS, modeIND:
				off := k
				if mode == modeIND {
					off = x + k
				}
				var ok bool
				if v, ok = load(ins.Op&0x18, off); !ok {
					return 0, nil
				}
			case modeMSH:
				if k >= uint32(len(pkt)) {
					return 0, nil
				}
				v = 4 * uint32(pkt[k]&0x0f)
			default:
				return 0, fmt.Errorf("pc %d: bad load mode %#x", pc, ins.Op)
			}
			if ins.Op&0x07 == clsLD {
				a = v
			} else {
				x = v
			}
		case clsST:
			mem[k%memWords] = a
		case clsSTX:
			mem[k%memWords] = x
		case clsALU:
			operand := k
			if ins.Op&srcX != 0 {
				operand = x
			}
			switch ins.Op & 0xf0 {
			case aluADD:
				a += operand
			case aluSUB:
				a -= operand
			case aluMUL:
				a *= operand
			case aluDIV, aluMOD:
				if operand == 0 {
					return 0, nil
				}
				if ins.Op&0xf0 == aluDIV {
					a /= operand
				} else {
					a %= operand
				}
			case aluOR:
				a |= operand
			case aluAND:
				a &= operand
			case aluXOR:
				a ^= operand
			case aluLSH:
				a <<= operand & 31
			case aluRSH:
				a >>= operand & 31
			case aluNEG:
				a = -a
			default:
				return 0, fmt.Errorf("pc %d: bad alu op %#x", pc, ins.Op)
			}
		case clsJMP:
			operand := k
			if ins.Op&srcX != 0 {
				operand = x
			}
			var cond bool
			switch ins.Op & 0xf0 {
			case jmpJA:
				pc += int(k)
				continue
			case jmpJEQ:
				cond = a == operand
			case jmpJGT:
				cond = a > operand
			case jmpJGE:
				cond = a >= operand
			case jmpJSET:
				cond = a&operand != 0
			default:
				return 0, fmt.Errorf("pc %d: bad jump %#x", pc, ins.Op)
			}
			if cond {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
		case clsRET:
			if ins.Op&retA != 0 {
				return a, nil
			}
			return k, nil
		case clsMISC:
			if ins.Op&miscTXA != 0 {
				a = x
			} else {
				x = a
			}
		}
	}
	return 0, fmt.Errorf("ran off the end of the program")
}

// disasm renders a program for failure messages.
func disasm(prog []Instruction) string {
	var b strings.Builder
	for i, ins := range prog {
		fmt.Fprintf(&b, "(%03d) op=%#04x jt=%d jf=%d k=%#x\n", i, ins.Op, ins.Jt, ins.Jf, ins.K)
	}
	return b.String()
}
