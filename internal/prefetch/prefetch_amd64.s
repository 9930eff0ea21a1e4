#include "textflag.h"

// func Line(p uintptr)
TEXT ·Line(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET

// func Pair(p, q uintptr)
TEXT ·Pair(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ p+0(FP), AX
	MOVQ q+8(FP), BX
	PREFETCHT0 (AX)
	PREFETCHT0 (BX)
	RET

// func Lines(ps []uintptr)
TEXT ·Lines(SB), NOSPLIT|NOFRAME, $0-24
	MOVQ ps_base+0(FP), AX
	MOVQ ps_len+8(FP), CX
	TESTQ CX, CX
	JZ done
loop:
	MOVQ (AX), BX
	PREFETCHT0 (BX)
	ADDQ $8, AX
	DECQ CX
	JNZ loop
done:
	RET
