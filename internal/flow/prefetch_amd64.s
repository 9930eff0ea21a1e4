#include "textflag.h"

// func prefetchSlot(p uintptr)
// Prefetches both cache lines of the 96-byte slot at p (offsets 0 and 88
// lie in its two lines wherever it starts). PREFETCHT0 retires at once, so
// unlike a plain load it never stalls the reorder buffer.
TEXT ·prefetchSlot(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	PREFETCHT0 88(AX)
	RET
