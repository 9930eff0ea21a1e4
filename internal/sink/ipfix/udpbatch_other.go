//go:build !linux

package ipfix

type udpSys struct{}

// send writes the messages one datagram each, in order, and calls done
// for each with its result.
func (b *udpBatch) send(done func(i int, err error)) {
	for i := range b.len() {
		b.calls++
		_, err := b.conn.Write(b.msg(i))
		done(i, err)
	}
}
