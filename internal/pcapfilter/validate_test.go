package pcapfilter

import (
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	ret := Instruction{Op: 0x06, K: 1}
	good := [][]Instruction{
		{ret},
		{{Op: 0x28, K: 12}, {Op: 0x15, Jt: 0, Jf: 1, K: 0x800}, ret, {Op: 0x06}},
		{{Op: 0x02, K: 3}, {Op: 0x61, K: 3}, {Op: 0x16}},                           // st M[3]; ldx M[3]; ret a
		{{Op: 0x05, K: 1}, {Op: 0x60, K: 0}, ret},                                  // ja over an unreachable read
		{{Op: 0x20, K: 0xfffff000 + 44}, {Op: 0x34, K: 3}, {Op: 0x64, K: 31}, ret}, // ancillary, div #3, lsh #31
	}
	for i, p := range good {
		if err := Validate(p); err != nil {
			t.Errorf("good program %d: %v", i, err)
		}
	}
	bad := []struct {
		prog []Instruction
		msg  string
	}{
		{nil, "empty"},
		{make([]Instruction, MaxInstructions+1), "4096"},
		{[]Instruction{{Op: 0x28, K: 12}}, "not a return"},
		{[]Instruction{{Op: 0x15, Jt: 1, Jf: 0}, ret}, "jump out of range"},
		{[]Instruction{{Op: 0x15, Jt: 0, Jf: 5}, ret, ret}, "jump out of range"},
		{[]Instruction{{Op: 0x05, K: 1}, ret}, "jump out of range"},
		{[]Instruction{{Op: 0x34, K: 0}, ret}, "division by zero"},
		{[]Instruction{{Op: 0x94, K: 0}, ret}, "division by zero"},
		{[]Instruction{{Op: 0x64, K: 32}, ret}, "shift by 32"},
		{[]Instruction{{Op: 0xff}, ret}, "unknown opcode"},
		{[]Instruction{{Op: 0x07 | 0x40}, ret}, "unknown opcode"},
		{[]Instruction{{Op: 0x60, K: 16}, ret}, "out of range"},
		{[]Instruction{{Op: 0x60, K: 2}, ret}, "read before written"},
		{[]Instruction{{Op: 0x28, K: 12}, {Op: 0x15, Jt: 1, Jf: 0}, {Op: 0x02, K: 1}, {Op: 0x61, K: 1}, ret}, "read before written"},
		{[]Instruction{{Op: 0x20, K: 0xfffff000 + 64}, ret}, "ancillary"},
		{[]Instruction{{Op: 0x20, K: 0xfffff000 + 2}, ret}, "ancillary"},
	}
	for i, c := range bad {
		err := Validate(c.prog)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("bad program %d: got %v, want an error containing %q", i, err, c.msg)
		}
	}
	if err := Validate(make([]Instruction, MaxInstructions+1)); !errors.Is(err, ErrTooLong) {
		t.Errorf("got %v, want ErrTooLong", err)
	}
}
