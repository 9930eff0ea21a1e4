#include "textflag.h"

// func stageKeys(keys unsafe.Pointer, stride uintptr, n int, ring *pending, seed *[6]uint64, tags *uint32, slots *slot, nslots uint32)
//
// For each of the n keys at keys, keys+stride, …: prep (table_slot.go) into
// ring[0], ring[1], …, then prefetch the home tag line and home slot. The
// same arithmetic as prep, in registers: no spills, no calls.
// Layouts (asserted in stage.go): Key 40 bytes, ports at 32 and 34; pending
// 48 bytes, h at 40, dir at 44; slot 96 bytes.
TEXT ·stageKeys(SB), NOSPLIT|NOFRAME, $0-60
	MOVQ keys+0(FP), SI
	MOVQ n+16(FP), R11
	IMULQ stride+8(FP), R11
	ADDQ SI, R11 // end of keys
	MOVQ ring+24(FP), DI
	MOVQ seed+32(FP), R8
	MOVQ tags+40(FP), R12
	MOVQ slots+48(FP), R13
	CMPQ SI, R11
	JAE done

loop:
	MOVQ 0(SI), AX  // a0: SrcAddr[0:8]
	MOVQ 8(SI), BX  // a1: SrcAddr[8:16]
	MOVQ 16(SI), CX // b0: DstAddr[0:8]
	MOVQ 24(SI), DX // b1: DstAddr[8:16]
	MOVQ 32(SI), R9 // x: ports, proto, ICMP type and code, version

	// Swapped x, R15: the two 16-bit ports exchanged, the high half kept
	// (x ^ low32 ^ low32 rotated by 16).
	MOVL R9, R10
	MOVL R9, R15
	ROLL $16, R15
	XORQ R10, R15
	XORQ R9, R15

	// CF = (DstAddr, DstPort) < (SrcAddr, SrcPort), big-endian: a borrow
	// chain from the ports up (MOV and BSWAP leave the flags alone). The
	// ports: low32(x) - low32(swapped x) = (DstPort:SrcPort) -
	// (SrcPort:DstPort) borrows iff DstPort < SrcPort.
	CMPL R9, R15
	MOVQ DX, R10
	BSWAPQ R10
	MOVQ BX, R14
	BSWAPQ R14
	SBBQ R14, R10
	MOVQ CX, R10
	BSWAPQ R10
	MOVQ AX, R14
	BSWAPQ R14
	SBBQ R14, R10
	SETCS 44(DI) // r.dir

	// Swap the endpoints and ports if CF (CMOV leaves the flags alone).
	MOVQ AX, R10
	CMOVQCS CX, AX
	CMOVQCS R10, CX
	MOVQ BX, R10
	CMOVQCS DX, BX
	CMOVQCS R10, DX
	CMOVQCS R15, R9

	MOVQ AX, 0(DI)
	MOVQ BX, 8(DI)
	MOVQ CX, 16(DI)
	MOVQ DX, 24(DI)
	MOVQ R9, 32(DI)

	// h = mum(mum(a0^s0, a1^s1)^x^s4, mum(b0^s2, b1^s3)^s5); mum(a, b) is
	// the 128-bit product's halves xored.
	MOVQ DX, R10
	XORQ 0(R8), AX
	XORQ 8(R8), BX
	MULQ BX
	XORQ DX, AX
	XORQ R9, AX
	XORQ 32(R8), AX
	MOVQ AX, BX
	MOVQ CX, AX
	XORQ 16(R8), AX
	XORQ 24(R8), R10
	MULQ R10
	XORQ DX, AX
	XORQ 40(R8), AX
	MULQ BX
	XORQ DX, AX
	SHRQ $32, AX
	ORL $1, AX
	MOVL AX, 40(DI) // r.h

	// Home index fastrange(h, nslots); prefetch its tag line and the (at
	// most two) lines of its slot.
	MOVL nslots+56(FP), R10
	IMULQ R10, AX
	SHRQ $32, AX
	PREFETCHT0 (R12)(AX*4)
	LEAQ (AX)(AX*2), AX
	SHLQ $5, AX
	ADDQ R13, AX
	PREFETCHT0 (AX)
	PREFETCHT0 88(AX)

	ADDQ $48, DI
	ADDQ stride+8(FP), SI
	CMPQ SI, R11
	JB loop

done:
	RET
