package flow

// lines is a chunk's prefetch list: two addresses per packet (the first
// and last byte it needs, which span at most two cache lines).
type lines [2 * batchChunk]uintptr
