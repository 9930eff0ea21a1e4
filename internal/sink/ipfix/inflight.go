package ipfix

// inflight tracks the messages written into a stream connection that its
// collector may not have received yet: the stream offset where each ends
// and the flow records it holds. TCP acknowledges bytes, not records, so
// the rule is: a message whose last byte the collector's kernel has
// acknowledged (SIOCOUTQ: bytes written but not acknowledged) is
// delivered; any other, when the connection breaks or the exporter stops,
// is undelivered. Acknowledged bytes that the collector never read (it
// closed with them in its receive buffer) cannot be seen from here.
type inflight struct {
	ends  []uint64 // stream offset after each message, oldest first from head
	flows []uint32
	head  int
	sum   uint64 // flows of the messages from head
}

// push adds a message ending at stream offset end with n flow records.
func (f *inflight) push(end uint64, n uint32) {
	if f.head > 0 && f.head >= len(f.ends)/2 { // reuse the front: amortised O(1), no growth in steady state
		k := copy(f.ends, f.ends[f.head:])
		copy(f.flows, f.flows[f.head:])
		f.ends, f.flows, f.head = f.ends[:k], f.flows[:k], 0
	}
	f.ends = append(f.ends, end)
	f.flows = append(f.flows, n)
	f.sum += uint64(n)
}

// acked forgets the messages that end at or before stream offset off.
func (f *inflight) acked(off uint64) {
	for f.head < len(f.ends) && f.ends[f.head] <= off {
		f.sum -= uint64(f.flows[f.head])
		f.head++
	}
}

// pending is the number of flow records in messages not known delivered.
func (f *inflight) pending() uint64 { return f.sum }

// messages is the number of messages tracked.
func (f *inflight) messages() int { return len(f.ends) - f.head }
