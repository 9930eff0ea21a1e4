package ipfixrecv

import (
	"encoding/binary"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/ipfix"
)

// gateSink blocks every Write until open is closed, then keeps records.
type gateSink struct {
	memSink
	open chan struct{}
}

func (g *gateSink) Write(recs []flow.Record) error {
	<-g.open
	return g.memSink.Write(recs)
}

// oneFieldMsg is an IPFIX message of domain with template 256
// (protocolIdentifier) and, when data, one record of it.
func oneFieldMsg(seq, domain uint32, data bool) []byte {
	b := make([]byte, 16, 32)
	binary.BigEndian.PutUint16(b, ipfix.Version)
	binary.BigEndian.PutUint32(b[8:], seq)
	binary.BigEndian.PutUint32(b[12:], domain)
	b = append(b, 0, 2, 0, 12, 1, 0, 0, 1, 0, 4, 0, 1) // template set: 256, 1 field: protocolIdentifier, 1 octet
	if data {
		b = append(b, 1, 0, 0, 5, 6) // data set 256: TCP
	}
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	return b
}

// floodTemplates builds in buf a message of domain announcing templates
// first..first+n-1 of fields fields each.
func floodTemplates(buf []byte, domain uint32, first uint16, n, fields int) []byte {
	be := binary.BigEndian
	buf = append(buf[:0], make([]byte, 16)...)
	be.PutUint16(buf, ipfix.Version)
	be.PutUint32(buf[12:], domain)
	buf = be.AppendUint16(buf, 2)
	buf = be.AppendUint16(buf, uint16(4+n*(4+4*fields)))
	for i := range n {
		buf = be.AppendUint16(buf, first+uint16(i))
		buf = be.AppendUint16(buf, uint16(fields))
		for f := range fields {
			buf = be.AppendUint16(buf, uint16(1+f%300))
			buf = be.AppendUint16(buf, 4)
		}
	}
	be.PutUint16(buf[2:], uint16(len(buf)))
	return buf
}
