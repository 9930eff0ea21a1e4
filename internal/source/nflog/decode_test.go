package nflog

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/weir-dev/weir/internal/nfnetlink"
)

func TestDecodeFull(t *testing.T) {
	var d Decoder
	var p Packet
	pl := udp4(a4, b4, 1234, 7777, 328, 128)
	if err := d.Decode(&p, full("weir-deny ", pl)); err != nil {
		t.Fatal(err)
	}
	want := Packet{Group: 5, Family: nfnetlink.FamilyInet, Hook: 1, HWProto: 0x0800, Mark: 0xbeef, InDev: 11, OutDev: 12,
		PhysInDev: 13, PhysOutDev: 14, UID: 1000, GID: 100, Seq: 42, Time: 1700000000_250000000,
		Has: HasHdr | HasMark | HasTimestamp | HasInDev | HasOutDev | HasPhysInDev | HasPhysOutDev | HasPrefix | HasPayload | HasUID | HasGID | HasSeq}
	got := p
	got.Prefix, got.Payload = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if string(p.Prefix) != "weir-deny " || !bytes.Equal(p.Payload, pl) {
		t.Errorf("prefix %q payload %x", p.Prefix, p.Payload)
	}
}

func TestDecodePrefixBounds(t *testing.T) {
	var d Decoder
	var p Packet
	long := string(bytes.Repeat([]byte("x"), 127))
	if err := d.Decode(&p, full(long, udp4(a4, b4, 1, 2, 100, 100))); err != nil {
		t.Fatal(err)
	}
	if len(p.Prefix) != MaxPrefixLen || d.PrefixCut != 1 {
		t.Errorf("prefix of %d bytes, cut %d", len(p.Prefix), d.PrefixCut)
	}
	// No NUL (not what the kernel sends): the whole value is the prefix.
	msg := newMsg(nfnetlink.FamilyInet, 5).attr(nfulaPrefix, 'a', 'b').attr(nfulaPayload, udp4(a4, b4, 1, 2, 100, 100)...).bytes()
	if err := d.Decode(&p, msg); err != nil || string(p.Prefix) != "ab" {
		t.Errorf("prefix %q, %v", p.Prefix, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	good := full("p", udp4(a4, b4, 1, 2, 100, 100))
	cfg := newMsg(nfnetlink.FamilyInet, 5).bytes()
	cfg[nfnetlink.MsgTypeOff] = nfulnlMsgConfig
	badLen := append([]byte(nil), good...)
	badLen[nfnetlink.HdrLen] = 2 // first attribute length 2 < 4
	cases := []struct {
		name string
		msg  []byte
		err  error
		r    Reason
	}{
		{"short", good[:10], ErrTruncated, ReasonShortHeader},
		{"cut", good[:len(good)-4], ErrTruncated, ReasonLength},
		{"config", cfg, ErrNotPacket, ReasonNotPacket},
		{"attr header", append(newMsg(nfnetlink.FamilyInet, 5).bytes()[:20], 1, 0), ErrTruncated, ReasonAttrHeader},
		{"attr length", badLen, ErrBadAttr, ReasonAttrLength},
		{"hdr size", newMsg(nfnetlink.FamilyInet, 5).attr(nfulaPacketHdr, 8, 0, 1).bytes(), ErrBadAttr, ReasonAttrSize},
		{"mark size", newMsg(nfnetlink.FamilyInet, 5).attr(nfulaMark, 1).bytes(), ErrBadAttr, ReasonAttrSize},
		{"ts size", newMsg(nfnetlink.FamilyInet, 5).attr(nfulaTimestamp, 1, 2, 3, 4).bytes(), ErrBadAttr, ReasonAttrSize},
		{"no payload", newMsg(nfnetlink.FamilyInet, 5).attr(nfulaPrefix, 'a', 0).bytes(), ErrPayload, ReasonNoPayload},
	}
	for _, c := range cases {
		if c.name == "attr header" { // fix the length field to cover the stray bytes
			c.msg[0] = byte(len(c.msg))
		}
		var d Decoder
		var p Packet
		err := d.Decode(&p, c.msg)
		if !errors.Is(err, c.err) || d.Errors[c.r] != 1 {
			t.Errorf("%s: err %v, counts %v; want %v under %v", c.name, err, d.Errors, c.err, c.r)
		}
	}
}

func TestNextMessage(t *testing.T) {
	a, b := full("a", udp4(a4, b4, 1, 2, 100, 100)), full("bb", udp4(a4, b4, 1, 2, 100, 99))
	buf := append(append([]byte(nil), a...), b...)
	m1, rest, err := NextMessage(buf)
	if err != nil || !bytes.Equal(m1, a) {
		t.Fatal(err)
	}
	m2, rest, err := NextMessage(rest)
	if err != nil || !bytes.Equal(m2, b) || len(rest) != 0 {
		t.Fatal(err, len(rest))
	}
	if _, _, err := NextMessage(buf[:20]); !errors.Is(err, ErrTruncated) {
		t.Error(err)
	}
}

// TestDecodeReal decodes every message the root test captured from the
// kernel (testdata/real.bin): all are NFLOG packets of group 5 in hook 1
// with a NUL-stripped prefix and a payload cut to the 128-byte copy range.
func TestDecodeReal(t *testing.T) {
	raw, err := os.ReadFile("testdata/real.bin")
	if err != nil {
		t.Skip(err)
	}
	var d Decoder
	var p Packet
	n := 0
	for len(raw) > 0 {
		msg, rest, err := NextMessage(raw)
		if err != nil {
			t.Fatal(err)
		}
		raw = rest
		if err := d.Decode(&p, msg); err != nil {
			t.Fatal(err)
		}
		n++
		if p.Group != 5 || p.Hook != 1 || p.InDev == 0 || p.Has&HasSeq == 0 ||
			(string(p.Prefix) != "weir-deny " && string(p.Prefix) != "weir-tcp") || len(p.Payload) > 128 {
			t.Errorf("message %d: %+v", n, p)
		}
	}
	if n != 19 {
		t.Errorf("%d messages, want 19", n)
	}
}
