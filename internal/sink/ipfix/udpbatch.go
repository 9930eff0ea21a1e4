package ipfix

import "net"

// Bounds of a udpBatch.
const (
	batchMessages = 64         // messages per batch, unpaced
	batchBytes    = 256 << 10  // bytes per batch
	gsoSegments   = 64         // datagrams per UDP_SEGMENT send (the kernel's UDP_MAX_SEGMENTS is 64 or 128)
	gsoBytes      = 65535 - 28 // payload of one UDP_SEGMENT send: one IPv4 datagram's worth
)

// udpBatch holds the encoded messages of a UDP exporter until they go out
// together: on Linux in one sendmmsg, runs of equal-sized messages as one
// UDP_SEGMENT (GSO) datagram each, so a cycle of hundreds of messages
// costs a few system calls instead of one each.
type udpBatch struct {
	conn  *net.UDPConn
	buf   []byte   // the messages back to back
	ends  []int    // end offset of each message in buf
	flows []uint32 // flow records of each message
	max   int      // messages per batch (the pace's burst when paced)
	calls uint64   // send system calls made (for tests)
	sys   udpSys   // the platform's sending state
}

func newUDPBatch(conn *net.UDPConn, max int) *udpBatch {
	return &udpBatch{conn: conn, max: max, buf: make([]byte, 0, batchBytes+65536)}
}

// add appends msg (copied: the encoder reuses its buffer) with its flow
// record count; it reports whether the batch is full.
func (b *udpBatch) add(msg []byte, flows uint32) bool {
	b.buf = append(b.buf, msg...)
	b.ends = append(b.ends, len(b.buf))
	b.flows = append(b.flows, flows)
	return len(b.ends) >= b.max || len(b.buf) >= batchBytes
}

// len returns the number of messages held.
func (b *udpBatch) len() int { return len(b.ends) }

// msg returns message i.
func (b *udpBatch) msg(i int) []byte {
	start := 0
	if i > 0 {
		start = b.ends[i-1]
	}
	return b.buf[start:b.ends[i]]
}

// reset empties the batch after a send.
func (b *udpBatch) reset() {
	b.buf, b.ends, b.flows = b.buf[:0], b.ends[:0], b.flows[:0]
}
