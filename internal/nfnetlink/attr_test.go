package nfnetlink

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestAttrRoundTrip: attributes appended with AppendAttr (padded to 4
// bytes) come back from Attr with their type, flag bits masked off, and
// value; a cut header and impossible lengths are told apart.
func TestAttrRoundTrip(t *testing.T) {
	b := AppendAttr(nil, 7, 1, 2, 3)                  // 4+3, padded to 8
	b = AppendAttr(b, 9|AttrFNested)                  // empty value
	b = AppendAttr(b, 0x3fff, 0xaa, 0xbb, 0xcc, 0xdd) // no padding needed
	if len(b) != 8+4+8 {
		t.Fatalf("appended %d bytes, want 20", len(b))
	}
	want := []struct {
		typ uint16
		val []byte
	}{{7, []byte{1, 2, 3}}, {9, []byte{}}, {0x3fff, []byte{0xaa, 0xbb, 0xcc, 0xdd}}}
	for i, w := range want {
		typ, val, rest, e := Attr(b)
		if e != AttrOK || typ != w.typ || !bytes.Equal(val, w.val) {
			t.Fatalf("attribute %d: type %d value %x (%v), want type %d value %x", i, typ, val, e, w.typ, w.val)
		}
		b = rest
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes left after the last attribute", len(b))
	}
	for _, c := range []struct {
		name string
		b    []byte
		want AttrErr
	}{
		{"cut header", []byte{8, 0, 1}, AttrCut},
		{"length below the header", []byte{3, 0, 1, 0}, AttrLength},
		{"length past the parent", []byte{9, 0, 1, 0, 0, 0, 0, 0}, AttrLength},
	} {
		if _, _, _, e := Attr(c.b); e != c.want {
			t.Errorf("%s: %v, want %v", c.name, e, c.want)
		}
	}
	// The last attribute's padding may be missing: rest is then empty.
	typ, val, rest, e := Attr([]byte{5, 0, 2, 0, 0xee})
	if e != AttrOK || typ != 2 || !bytes.Equal(val, []byte{0xee}) || len(rest) != 0 {
		t.Errorf("unpadded last attribute: type %d value %x rest %x (%v)", typ, val, rest, e)
	}
}

// TestHeaderAndErrno: PutHeader lays out nlmsghdr and nfgenmsg as the
// kernel reads them; NextMessage frames the result; Errno reads an
// NLMSG_ERROR's code and refuses one too short to hold it.
func TestHeaderAndErrno(t *testing.T) {
	b := make([]byte, HdrLen)
	PutHeader(b, 4, 1, FlagRequest|FlagAck, 77, FamilyInet6, 0x0102)
	ne := binary.NativeEndian
	if ne.Uint32(b[MsgLenOff:]) != HdrLen || ne.Uint16(b[MsgTypeOff:]) != 4<<8|1 ||
		ne.Uint16(b[MsgFlagsOff:]) != FlagRequest|FlagAck || ne.Uint32(b[MsgSeqOff:]) != 77 ||
		ne.Uint32(b[MsgPidOff:]) != 0 || b[MsgHdrLen+GenFamilyOff] != FamilyInet6 ||
		b[MsgHdrLen+GenVersionOff] != 0 || !bytes.Equal(b[MsgHdrLen+GenResIDOff:], []byte{1, 2}) {
		t.Fatalf("header % x", b)
	}
	msg, rest, ok := NextMessage(append(b, 0xff))
	if !ok || len(msg) != HdrLen || len(rest) != 1 {
		t.Fatalf("NextMessage: %d bytes, %d left, %v", len(msg), len(rest), ok)
	}
	em := make([]byte, MsgHdrLen+ErrorLen)
	ne.PutUint32(em[MsgHdrLen:], uint32(0xffffffff-12+1)) // -12: ENOMEM
	if e, ok := Errno(em); !ok || e != 12 {
		t.Errorf("Errno = %d, %v; want 12", e, ok)
	}
	if _, ok := Errno(em[:MsgHdrLen+3]); ok {
		t.Error("Errno of a cut message reported a code")
	}
}

// FuzzAttr: walking any bytes as attributes ends, never panics, and
// every value and rest lies inside the input.
func FuzzAttr(f *testing.F) {
	f.Add(AppendAttr(AppendAttr(nil, 1, 1, 2, 3), 2))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{4, 0, 0x80, 0x01, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		for steps, n := 0, len(b); len(b) > 0; steps++ {
			if steps > n/AttrHdrLen {
				t.Fatal("walk does not advance")
			}
			typ, val, rest, e := Attr(b)
			if e != AttrOK {
				return
			}
			if typ > AttrTypeMask || len(val)+AttrHdrLen > len(b) || len(rest) >= len(b) {
				t.Fatalf("type %d, value %d bytes, rest %d of %d", typ, len(val), len(rest), len(b))
			}
			b = rest
		}
	})
}
