package nflog

import (
	"encoding/binary"

	"github.com/weir-dev/weir/internal/nfnetlink"
)

// msgBuilder builds NFLOG messages for tests.
type msgBuilder struct{ b []byte }

func newMsg(family uint8, group uint16) *msgBuilder {
	b := make([]byte, nfnetlink.HdrLen)
	binary.NativeEndian.PutUint16(b[nfnetlink.MsgTypeOff:], nfnlSubsysULOG<<8|nfulnlMsgPacket)
	b[nfnetlink.MsgHdrLen+nfnetlink.GenFamilyOff] = family
	binary.BigEndian.PutUint16(b[nfnetlink.MsgHdrLen+nfnetlink.GenResIDOff:], group)
	return &msgBuilder{b}
}

func (m *msgBuilder) attr(typ uint16, val ...byte) *msgBuilder {
	m.b = nfnetlink.AppendAttr(m.b, typ, val...)
	return m
}

func (m *msgBuilder) be32(typ uint16, v uint32) *msgBuilder {
	return m.attr(typ, binary.BigEndian.AppendUint32(nil, v)...)
}

func (m *msgBuilder) bytes() []byte {
	binary.NativeEndian.PutUint32(m.b[nfnetlink.MsgLenOff:], uint32(len(m.b)))
	return append([]byte(nil), m.b...)
}

// udp4 returns an IPv4/UDP packet of ipLen total bytes, cut to capLen.
func udp4(src, dst [4]byte, sport, dport uint16, ipLen, capLen int) []byte {
	p := make([]byte, max(ipLen, 28))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(ipLen))
	p[8], p[9] = 64, 17
	copy(p[12:], src[:])
	copy(p[16:], dst[:])
	binary.BigEndian.PutUint16(p[20:], sport)
	binary.BigEndian.PutUint16(p[22:], dport)
	binary.BigEndian.PutUint16(p[24:], uint16(ipLen-20))
	return p[:min(capLen, len(p))]
}

// udp6 returns an IPv6/UDP packet of 40+payLen bytes, cut to capLen.
func udp6(src, dst [16]byte, sport, dport uint16, payLen, capLen int) []byte {
	p := make([]byte, 40+max(payLen, 8))
	p[0] = 0x60
	binary.BigEndian.PutUint16(p[4:], uint16(payLen))
	p[6], p[7] = 17, 64
	copy(p[8:], src[:])
	copy(p[24:], dst[:])
	binary.BigEndian.PutUint16(p[40:], sport)
	binary.BigEndian.PutUint16(p[42:], dport)
	binary.BigEndian.PutUint16(p[44:], uint16(payLen))
	return p[:min(capLen, len(p))]
}

var (
	a4 = [4]byte{198, 18, 0, 1}
	b4 = [4]byte{198, 18, 0, 2}
	a6 = [16]byte{0xfd, 0, 0x77, 0xee, 15: 1}
	b6 = [16]byte{0xfd, 0, 0x77, 0xee, 15: 2}
)

// full returns a message with every attribute Decode reads.
func full(prefix string, payload []byte) []byte {
	ts := make([]byte, 16)
	binary.BigEndian.PutUint64(ts, 1700000000)
	binary.BigEndian.PutUint64(ts[8:], 250000)
	return newMsg(nfnetlink.FamilyInet, 5).
		attr(nfulaPacketHdr, 0x08, 0x00, 1, 0).
		attr(nfulaPrefix, append([]byte(prefix), 0)...).
		be32(nfulaIfindexIndev, 11).be32(nfulaIfindexOutdev, 12).
		be32(nfulaIfindexPhysin, 13).be32(nfulaIfindexPhysout, 14).
		be32(nfulaMark, 0xbeef).attr(nfulaTimestamp, ts...).
		be32(nfulaUID, 1000).be32(nfulaGID, 100).be32(nfulaSeq, 42).
		attr(nfulaHwtype, 0, 1).
		attr(nfulaPayload, payload...).bytes()
}
