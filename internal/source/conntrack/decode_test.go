package conntrack

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"testing"

	"github.com/weir-dev/weir/internal/nfnetlink"
)

var (
	a4, b4 = netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	a6, b6 = netip.MustParseAddr("fd00:77ee::1"), netip.MustParseAddr("fd00:77ee::2")
)

// full builds a message with every attribute the decoder keeps, plus
// attributes it skips (CTA_HELP, CTA_SECCTX, CTA_SEQ_ADJ_ORIG, an unknown
// type 99, an unknown nested tuple member), between src and dst.
func full(src, dst netip.Addr, family uint8) []byte {
	m := newMsg(ipctnlMsgCtNew, nfnetlink.FlagCreate|nfnetlink.FlagExcl, family)
	m.tuple(ctaTupleOrig, src, dst, 6, 40000, 443)
	m.begin(ctaTupleReply).begin(ctaTupleIP)
	if src.Is4() {
		m.attr(ctaIPv4Src, netip.MustParseAddr("198.18.0.9").AsSlice()).attr(ctaIPv4Dst, src.AsSlice())
	} else {
		m.attr(ctaIPv6Src, netip.MustParseAddr("fd00:77ee::9").AsSlice()).attr(ctaIPv6Dst, src.AsSlice())
	}
	m.end().begin(ctaTupleProto).u8(ctaProtoNum, 6).be16(ctaProtoSrcPort, 8443).be16(ctaProtoDstPort, 40000).be16(42, 1).end()
	m.be16(ctaTupleZone, 5).end()
	m.begin(ctaProtoinfo).begin(ctaProtoinfoTCP).
		u8(ctaProtoinfoTCPState, TCPEstablished).u8(ctaProtoinfoTCPWscaleOrig, 7).u8(ctaProtoinfoTCPWscaleReply, 9).
		attr(ctaProtoinfoTCPFlagsOrig, []byte{0x23, 0xff}).attr(ctaProtoinfoTCPFlagsReply, []byte{0x32, 0xff}).end().end()
	m.be32(ctaStatus, uint32(StatusConfirmed|StatusAssured|StatusSeenReply|StatusDstNAT|StatusDstNATDone))
	m.begin(ctaHelp).attr(1, []byte("ftp\x00")).end()
	m.be32(ctaMark, 0xdeadbeef).be32(ctaTimeout, 431999).be32(ctaUse, 2).be32(ctaID, 0x12345678).be16(ctaZone, 5)
	m.counters(ctaCountersOrig, 1<<33+3, 1<<40+1500).counters(ctaCountersReply, 2, 120)
	m.attr(ctaSecctx, []byte("system_u:object_r:unlabeled_t:s0\x00"))
	m.begin(ctaSeqAdjOrig).be32(1, 1).end()
	m.attr(ctaLabels, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	m.begin(ctaTimestamp).be64(ctaTimestampStart, 1_700_000_000_000_000_000).be64(ctaTimestampStop, 1_700_000_001_000_000_000).end()
	m.attr(99, []byte{1, 2, 3})
	return m.bytes()
}

// want is what full decodes to.
func want(src, dst netip.Addr, family uint8) Conn {
	v6 := src.Is6()
	nat := netip.MustParseAddr("198.18.0.9")
	if v6 {
		nat = netip.MustParseAddr("fd00:77ee::9")
	}
	return Conn{
		Type: MsgNew, Flags: nfnetlink.FlagCreate | nfnetlink.FlagExcl, Family: family,
		Has: HasOrig | HasReply | HasTCP | HasStatus | HasMark | HasTimeout | HasUse | HasID | HasZone |
			HasCountersOrig | HasCountersReply | HasLabels | HasTimestampStart | HasTimestampStop,
		Orig:   Tuple{Src: src.As16(), Dst: dst.As16(), SrcPort: 40000, DstPort: 443, Proto: 6, V6: v6},
		Reply:  Tuple{Src: nat.As16(), Dst: src.As16(), SrcPort: 8443, DstPort: 40000, Proto: 6, V6: v6, Zone: 5},
		Status: StatusConfirmed | StatusAssured | StatusSeenReply | StatusDstNAT | StatusDstNATDone,
		Mark:   0xdeadbeef, Zone: 5, ID: 0x12345678, Timeout: 431999, Use: 2,
		Labels: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, LabelLen: 16,
		CountersOrig: Counters{1<<33 + 3, 1<<40 + 1500}, CountersReply: Counters{2, 120},
		TCPState: TCPEstablished, TCPWscaleOrig: 7, TCPWscaleReply: 9, TCPFlagsOrig: 0x23, TCPFlagsReply: 0x32,
		Start: 1_700_000_000_000_000_000, Stop: 1_700_000_001_000_000_000,
	}
}

// TestDecodeFull decodes one hand-built message with every attribute, for
// IPv4 and IPv6 through the same code path, into exactly the Conn expected
// (whole-struct comparison: a field decoded wrong or not at all fails).
func TestDecodeFull(t *testing.T) {
	for _, tc := range []struct {
		name     string
		src, dst netip.Addr
		family   uint8
	}{{"ipv4", a4, b4, nfnetlink.FamilyInet}, {"ipv6", a6, b6, nfnetlink.FamilyInet6}} {
		t.Run(tc.name, func(t *testing.T) {
			var c Conn
			if err := Decode(&c, full(tc.src, tc.dst, tc.family)); err != nil {
				t.Fatal(err)
			}
			if w := want(tc.src, tc.dst, tc.family); c != w {
				t.Errorf("decoded\n%+v\nwant\n%+v", c, w)
			}
			if c.Orig.SrcAddr() != tc.src || c.Orig.DstAddr() != tc.dst {
				t.Errorf("addresses %v → %v, want %v → %v", c.Orig.SrcAddr(), c.Orig.DstAddr(), tc.src, tc.dst)
			}
			if !c.Created() || !c.Status.Assured() || !c.Status.DNAT() || c.Status.SNAT() || c.Status.Dying() {
				t.Errorf("created %v, status helpers wrong for %#x", c.Created(), c.Status)
			}
		})
	}
}

// TestDecodeSmallForms checks the 32-bit counters, ICMP and ICMPv6 tuples,
// short labels, a delete message, the dying and SNAT bits, attribute type
// flags (NLA_F_NET_BYTEORDER) and a last attribute without padding.
func TestDecodeSmallForms(t *testing.T) {
	m := newMsg(ipctnlMsgCtDelete, 0, nfnetlink.FamilyInet)
	// ICMP echo request: type 8, code 0.
	m.tuple(ctaTupleOrig, a4, b4, 1, 0x4242, 8<<8).tuple(ctaTupleReply, b4, a4, 1, 0x4242, 0)
	m.begin(ctaCountersOrig).be32(ctaCounters32Packets, 7).be32(ctaCounters32Bytes, 700).end()
	m.be32(ctaStatus|nfnetlink.AttrFNetByteord, uint32(StatusDying|StatusSrcNAT))
	m.attr(ctaLabels, []byte{0xaa, 0xbb, 0xcc, 0xdd})
	m.attr(ctaMark, []byte{0, 0, 0, 9})
	msg := m.bytes()
	var c Conn
	if err := Decode(&c, msg); err != nil {
		t.Fatal(err)
	}
	if c.Type != MsgDelete || c.Created() || c.Orig.ICMPID != 0x4242 || c.Orig.ICMPType != 8 || c.Reply.ICMPType != 0 ||
		c.CountersOrig != (Counters{7, 700}) || !c.Status.Dying() || !c.Status.SNAT() ||
		c.LabelLen != 4 || c.Labels != [16]byte{0xaa, 0xbb, 0xcc, 0xdd} || c.Mark != 9 || c.Orig.V6 {
		t.Errorf("decoded %+v", c)
	}

	m = newMsg(ipctnlMsgCtNew, 0, nfnetlink.FamilyInet6)
	m.tuple(ctaTupleOrig, a6, b6, 58, 7, 128<<8|3)
	m.u8(ctaProtoinfo|nfnetlink.AttrFNested, 0) // a nested attribute of 1 byte: a cut-off member header
	msg = m.bytes()
	msg = msg[:len(msg)-3] // without its padding, which the last attribute may omit
	binary.NativeEndian.PutUint32(msg, uint32(len(msg)))
	if err := Decode(&c, msg); !errors.Is(err, ErrTruncated) {
		t.Fatalf("protoinfo of 1 byte: %v, want ErrTruncated", err)
	}
	m = newMsg(ipctnlMsgCtNew, 0, nfnetlink.FamilyInet6)
	m.tuple(ctaTupleOrig, a6, b6, 58, 7, 128<<8|3)
	m.u8(ctaProtoNum+200, 1) // an unknown attribute, last and unpadded
	msg = m.bytes()
	msg = msg[:len(msg)-3]
	binary.NativeEndian.PutUint32(msg, uint32(len(msg)))
	if err := Decode(&c, msg); err != nil {
		t.Fatal(err)
	}
	if !c.Orig.V6 || c.Orig.ICMPID != 7 || c.Orig.ICMPType != 128 || c.Orig.ICMPCode != 3 || c.Orig.Proto != 58 {
		t.Errorf("icmpv6 tuple %+v", c.Orig)
	}
}

// TestDecodeReuse decodes an IPv6 message with everything, then a sparse
// IPv4 one into the same Conn: nothing of the first may remain.
func TestDecodeReuse(t *testing.T) {
	var c, fresh Conn
	sparse := newMsg(ipctnlMsgCtNew, 0, nfnetlink.FamilyInet).tuple(ctaTupleOrig, a4, b4, 17, 1, 2).bytes()
	if err := Decode(&fresh, sparse); err != nil {
		t.Fatal(err)
	}
	if err := Decode(&c, full(a6, b6, nfnetlink.FamilyInet6)); err != nil {
		t.Fatal(err)
	}
	if err := Decode(&c, sparse); err != nil {
		t.Fatal(err)
	}
	if c != fresh {
		t.Errorf("reused Conn %+v, fresh %+v", c, fresh)
	}
}

// TestDecodeMalformed: every kind of malformed message returns its
// sentinel error and is counted under its reason; none panics.
func TestDecodeMalformed(t *testing.T) {
	good := full(a4, b4, nfnetlink.FamilyInet)
	set32 := func(b []byte, off int, v uint32) []byte {
		b = append([]byte(nil), b...)
		binary.NativeEndian.PutUint32(b[off:], v)
		return b
	}
	set16 := func(b []byte, off int, v uint16) []byte {
		b = append([]byte(nil), b...)
		binary.NativeEndian.PutUint16(b[off:], v)
		return b
	}
	first := nfnetlink.MsgHdrLen + nfnetlink.GenLen // the first attribute: CTA_TUPLE_ORIG
	bad := func(build func(m *builder)) []byte {
		m := newMsg(ipctnlMsgCtNew, 0, nfnetlink.FamilyInet)
		build(m)
		return m.bytes()
	}
	for _, tc := range []struct {
		name   string
		msg    []byte
		err    error
		reason Reason
	}{
		{"empty", nil, ErrTruncated, ReasonShortHeader},
		{"header only", good[:nfnetlink.MsgHdrLen], ErrTruncated, ReasonShortHeader},
		{"length past buffer", set32(good, 0, uint32(len(good)+4)), ErrTruncated, ReasonLength},
		{"length below headers", set32(good, 0, 19), ErrTruncated, ReasonLength},
		{"other subsystem", set16(good, nfnetlink.MsgTypeOff, 2<<8), ErrNotConntrack, ReasonNotCtnetlink},
		{"unknown message", set16(good, nfnetlink.MsgTypeOff, 1<<8|9), ErrNotConntrack, ReasonNotCtnetlink},
		{"netlink done", set16(good, nfnetlink.MsgTypeOff, nfnetlink.MsgDone), ErrNotConntrack, ReasonNotCtnetlink},
		{"attr header cut", set32(good[:first+2], 0, uint32(first+2)), ErrTruncated, ReasonAttrHeader},
		{"attr length 3", set16(good, first, 3), ErrBadAttr, ReasonAttrLength},
		{"attr length past message", set16(good, first, uint16(len(good))), ErrBadAttr, ReasonAttrLength},
		{"nested length past parent", set16(good, first+nfnetlink.AttrHdrLen, 0x200), ErrBadAttr, ReasonAttrLength},
		{"ipv4 of 5 bytes", bad(func(m *builder) {
			m.begin(ctaTupleOrig).begin(ctaTupleIP).attr(ctaIPv4Src, []byte{1, 2, 3, 4, 5}).end().end()
		}), ErrBadAttr, ReasonAttrSize},
		{"ipv6 of 4 bytes", bad(func(m *builder) {
			m.begin(ctaTupleReply).begin(ctaTupleIP).attr(ctaIPv6Dst, []byte{1, 2, 3, 4}).end().end()
		}), ErrBadAttr, ReasonAttrSize},
		{"port of 4 bytes", bad(func(m *builder) { m.begin(ctaTupleOrig).begin(ctaTupleProto).be32(ctaProtoSrcPort, 1).end().end() }), ErrBadAttr, ReasonAttrSize},
		{"proto of 2 bytes", bad(func(m *builder) { m.begin(ctaTupleOrig).begin(ctaTupleProto).be16(ctaProtoNum, 6).end().end() }), ErrBadAttr, ReasonAttrSize},
		{"tuple zone of 4 bytes", bad(func(m *builder) { m.begin(ctaTupleOrig).be32(ctaTupleZone, 1).end() }), ErrBadAttr, ReasonAttrSize},
		{"status of 8 bytes", bad(func(m *builder) { m.be64(ctaStatus, 1) }), ErrBadAttr, ReasonAttrSize},
		{"zone of 4 bytes", bad(func(m *builder) { m.be32(ctaZone, 1) }), ErrBadAttr, ReasonAttrSize},
		{"labels of 17 bytes", bad(func(m *builder) { m.attr(ctaLabels, make([]byte, 17)) }), ErrBadAttr, ReasonAttrSize},
		{"counter of 4 bytes", bad(func(m *builder) { m.begin(ctaCountersOrig).be32(ctaCountersBytes, 1).end() }), ErrBadAttr, ReasonAttrSize},
		{"counter32 of 8 bytes", bad(func(m *builder) { m.begin(ctaCountersReply).be64(ctaCounters32Packets, 1).end() }), ErrBadAttr, ReasonAttrSize},
		{"tcp state of 2 bytes", bad(func(m *builder) {
			m.begin(ctaProtoinfo).begin(ctaProtoinfoTCP).be16(ctaProtoinfoTCPState, 1).end().end()
		}), ErrBadAttr, ReasonAttrSize},
		{"tcp flags of 1 byte", bad(func(m *builder) {
			m.begin(ctaProtoinfo).begin(ctaProtoinfoTCP).u8(ctaProtoinfoTCPFlagsReply, 1).end().end()
		}), ErrBadAttr, ReasonAttrSize},
		{"timestamp of 4 bytes", bad(func(m *builder) { m.begin(ctaTimestamp).be32(ctaTimestampStop, 1).end() }), ErrBadAttr, ReasonAttrSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d Decoder
			var c Conn
			err := d.Decode(&c, tc.msg)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			for r := range NumReasons {
				if w := uint64(0); r == tc.reason {
					w = 1
					if d.Errors[r] != w {
						t.Errorf("reason %v counted %d times, want 1 (counts %v)", r, d.Errors[r], d.Errors)
					}
				} else if d.Errors[r] != 0 {
					t.Errorf("reason %v counted %d times, want 0", r, d.Errors[r])
				}
			}
		})
	}
}

// TestNextMessage splits concatenated messages and rejects cut ones.
func TestNextMessage(t *testing.T) {
	one := newMsg(ipctnlMsgCtNew, 0, nfnetlink.FamilyInet).tuple(ctaTupleOrig, a4, b4, 17, 1, 2).bytes()
	two := full(a6, b6, nfnetlink.FamilyInet6)
	buf := append(append(append([]byte(nil), one...), two...), one[:10]...)
	m1, rest, err := NextMessage(buf)
	if err != nil || len(m1) != len(one) {
		t.Fatalf("first: %d bytes, %v", len(m1), err)
	}
	m2, rest, err := NextMessage(rest)
	if err != nil || len(m2) != len(two) {
		t.Fatalf("second: %d bytes, %v", len(m2), err)
	}
	if _, _, err := NextMessage(rest); !errors.Is(err, ErrTruncated) {
		t.Fatalf("cut message: %v, want ErrTruncated", err)
	}
}

// TestDecodeReal decodes the messages captured from the kernel by
// TestDump -capture (UDP, ICMP and TCP over IPv4 and IPv6): all decode,
// with counters, timestamps and both tuples.
func TestDecodeReal(t *testing.T) {
	raw, err := os.ReadFile("testdata/real.bin")
	if err != nil {
		t.Fatal(err)
	}
	protos := map[uint8]int{}
	for n := 0; len(raw) > 0; n++ {
		msg, rest, err := NextMessage(raw)
		if err != nil {
			t.Fatalf("message %d: %v", n, err)
		}
		raw = rest
		var c Conn
		if err := Decode(&c, msg); err != nil {
			t.Fatalf("message %d: %v", n, err)
		}
		need := HasOrig | HasReply | HasStatus | HasCountersOrig | HasCountersReply | HasID | HasUse | HasTimeout | HasTimestampStart
		if c.Has&need != need || c.CountersOrig.Packets == 0 || c.Orig.Src != c.Reply.Dst || c.Orig.Proto != c.Reply.Proto {
			t.Errorf("message %d: %+v", n, c)
		}
		protos[c.Orig.Proto]++
	}
	if protos[6] != 4 || protos[17] != 4 || protos[1] != 1 || protos[58] != 1 {
		t.Errorf("entries by protocol %v, want 4 TCP, 4 UDP, 1 ICMP, 1 ICMPv6", protos)
	}
}

// TestDecodeAllocs: decoding allocates nothing, for good and bad input.
func TestDecodeAllocs(t *testing.T) {
	msgs := [][]byte{full(a4, b4, nfnetlink.FamilyInet), full(a6, b6, nfnetlink.FamilyInet6), full(a4, b4, nfnetlink.FamilyInet)[:30]}
	var d Decoder
	var c Conn
	if n := testing.AllocsPerRun(100, func() {
		for _, m := range msgs {
			_ = d.Decode(&c, m)
		}
	}); n != 0 {
		t.Errorf("%v allocations per run, want 0", n)
	}
}
