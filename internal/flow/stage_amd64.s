#include "textflag.h"

// Layouts (asserted in stage.go): Key 40 bytes, ports at 32 and 34; pending
// 48 bytes, h at 40, dir at 44; slot 96 bytes.

// SETUP loads the arguments: SI the first key, R11 the end of the keys,
// DI the first ring entry, R8 the seeds, R12 the tags.
#define SETUP \
	MOVQ keys+0(FP), SI; \
	MOVQ n+16(FP), R11; \
	IMULQ stride+8(FP), R11; \
	ADDQ SI, R11; \
	MOVQ ring+24(FP), DI; \
	MOVQ seed+32(FP), R8; \
	MOVQ tags+40(FP), R12

// HASH is prep (table_slot.go) of the key at SI into the ring entry at DI,
// in registers, then AX = fastrange(h, nslots) and its tag line prefetched.
//
// a0, a1 (AX, BX) are SrcAddr's words, b0, b1 (CX, DX) DstAddr's, x (R9)
// the ports, protocol, ICMP type and code and version. R15 = x with the
// ports exchanged (x ^ low32 ^ low32 rotated by 16). CF = (DstAddr,
// DstPort) < (SrcAddr, SrcPort), big-endian, is a borrow chain from the
// ports up (MOV, BSWAP and CMOV leave the flags alone): low32(x) -
// low32(R15) = (DstPort:SrcPort) - (SrcPort:DstPort) borrows iff DstPort <
// SrcPort. CF is r.dir; if set, the endpoints and ports swap. Then h =
// mum(mum(a0^s0, a1^s1)^x^s4, mum(b0^s2, b1^s3)^s5) with mum(a, b) the
// 128-bit product's halves xored, h>>32|1 is r.h.
#define HASH \
	MOVQ 0(SI), AX; \
	MOVQ 8(SI), BX; \
	MOVQ 16(SI), CX; \
	MOVQ 24(SI), DX; \
	MOVQ 32(SI), R9; \
	MOVL R9, R10; \
	MOVL R9, R15; \
	ROLL $16, R15; \
	XORQ R10, R15; \
	XORQ R9, R15; \
	CMPL R9, R15; \
	MOVQ DX, R10; \
	BSWAPQ R10; \
	MOVQ BX, R14; \
	BSWAPQ R14; \
	SBBQ R14, R10; \
	MOVQ CX, R10; \
	BSWAPQ R10; \
	MOVQ AX, R14; \
	BSWAPQ R14; \
	SBBQ R14, R10; \
	SETCS 44(DI); \
	MOVQ AX, R10; \
	CMOVQCS CX, AX; \
	CMOVQCS R10, CX; \
	MOVQ BX, R10; \
	CMOVQCS DX, BX; \
	CMOVQCS R10, DX; \
	CMOVQCS R15, R9; \
	MOVQ AX, 0(DI); \
	MOVQ BX, 8(DI); \
	MOVQ CX, 16(DI); \
	MOVQ DX, 24(DI); \
	MOVQ R9, 32(DI); \
	MOVQ DX, R10; \
	XORQ 0(R8), AX; \
	XORQ 8(R8), BX; \
	MULQ BX; \
	XORQ DX, AX; \
	XORQ R9, AX; \
	XORQ 32(R8), AX; \
	MOVQ AX, BX; \
	MOVQ CX, AX; \
	XORQ 16(R8), AX; \
	XORQ 24(R8), R10; \
	MULQ R10; \
	XORQ DX, AX; \
	XORQ 40(R8), AX; \
	MULQ BX; \
	XORQ DX, AX; \
	SHRQ $32, AX; \
	ORL $1, AX; \
	MOVL AX, 40(DI); \
	MOVL nslots+56(FP), R10; \
	IMULQ R10, AX; \
	SHRQ $32, AX; \
	PREFETCHT0 (R12)(AX*4)

// func stageKeys(keys unsafe.Pointer, stride uintptr, n int, ring *pending, seed *[6]uint64, tags *uint32, slots *slot, nslots uint32)
//
// For each of the n keys at keys, keys+stride, …: prep into ring[0],
// ring[1], …, then prefetch the home tag line and the (at most two) lines
// of the home slot. No spills, no calls.
TEXT ·stageKeys(SB), NOSPLIT|NOFRAME, $0-60
	SETUP
	MOVQ slots+48(FP), R13
	CMPQ SI, R11
	JAE keysdone

keysloop:
	HASH
	LEAQ (AX)(AX*2), AX
	SHLQ $5, AX
	ADDQ R13, AX
	PREFETCHT0 (AX)
	PREFETCHT0 88(AX)
	ADDQ $48, DI
	ADDQ stride+8(FP), SI
	CMPQ SI, R11
	JB keysloop

keysdone:
	RET
