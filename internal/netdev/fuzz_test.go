package netdev

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzParseLink feeds arbitrary datagrams to the notification decoder
// (netlink header walk, ifinfomsg, attribute walk) and arbitrary bodies to
// parseLink. Seeds: hand-made good and malformed messages, and real
// datagrams from a link dump of the namespace the test runs in (Linux,
// when netlink is usable); testdata/fuzz/FuzzParseLink holds real messages
// from a test host with lo, a veth, a bridge and an enslaved link.
func FuzzParseLink(f *testing.F) {
	good := vethMsg(rtmNewLink, 12, "veth0")
	bad := append([]byte(nil), good...)
	hostEndian.PutUint32(bad, 0) // nlmsg_len 0
	f.Add(good)
	f.Add(vethMsg(rtmDelLink, 3, "abcdefghijklmno"))
	f.Add(concat(good, vethMsg(rtmDelLink, 12, "veth0")))
	f.Add(concat(good, bad, good))
	f.Add(nlmsg(rtmNewLink, 0, 0, 0, append(ifinfo(0, 1, 2, 0), 0, 0, 3, 0)))  // zero-length attribute
	f.Add(nlmsg(rtmNewLink, 0, 0, 0, append(ifinfo(0, 1, 2, 0), 40, 0, 3, 0))) // attribute past the end
	f.Add(nlmsg(rtmNewLink, 0, 0, 0, ifinfo(7, 1, 2, 0, strAttr(iflaIfname, "br"))))
	f.Add(nlmsg(rtmNewLink, 0, 0, 0, ifinfo(0, 1, 2, 0, attr{iflaLinkinfo, []byte{5, 0, 1, 0}})))
	f.Add(nlmsg(nlmsgDone, 2, 1, 1, []byte{0, 0, 0, 0}))
	f.Add(good[:20])
	f.Add([]byte{})
	for _, d := range liveDatagrams(f) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c counters
		events := 0
		steps := 0
		for rest := b; len(rest) > 0; {
			if steps++; steps > len(b)/nlmsgHdrLen+1 {
				t.Fatalf("walk did not end after %d steps over %d bytes", steps, len(b))
			}
			ev, res, next := nextEvent(rest, &c)
			if len(next) >= len(rest) {
				t.Fatalf("no progress: %d bytes left of %d", len(next), len(rest))
			}
			rest = next
			if res == resEvent {
				events++
				checkLink(t, ev.Link)
				roundTrip(t, ev)
			}
		}
		st := c.snapshot()
		if st.Messages != uint64(events)+st.Ignored+st.Malformed {
			t.Fatalf("stats %+v: messages != %d events + ignored + malformed", st, events)
		}
		if l, _, r := parseLink(b); r == ReasonNone {
			checkLink(t, l)
		} else if r >= NumReasons {
			t.Fatalf("reason %d out of range", r)
		}
	})
}

// checkLink asserts what every decoded link must satisfy.
func checkLink(t *testing.T, l Link) {
	t.Helper()
	if l.Index <= 0 || len(l.Name) == 0 || len(l.Name) > 15 || bytes.IndexByte([]byte(l.Name), 0) >= 0 ||
		l.Master < 0 || len(l.Kind) > maxKind || bytes.IndexByte([]byte(l.Kind), 0) >= 0 {
		t.Fatalf("decoded an impossible link %+v", l)
	}
}

// roundTrip re-encodes a decoded event and decodes it again: the same
// event must come back.
func roundTrip(t *testing.T, ev Event) {
	t.Helper()
	l := ev.Link
	var flags uint32
	if l.Up {
		flags |= tFlagUp
	}
	if l.Running {
		flags |= tFlagRunning
	}
	if l.Loopback {
		flags |= tFlagLoopback
	}
	as := []attr{strAttr(iflaIfname, l.Name)}
	if l.Master != 0 {
		as = append(as, u32Attr(iflaMaster, uint32(l.Master)))
	}
	if l.Kind != "" {
		as = append(as, nested(iflaLinkinfo, strAttr(iflaInfoKind, l.Kind)))
	}
	typ := uint16(rtmNewLink)
	if ev.Deleted {
		typ = rtmDelLink
	}
	var c counters
	got, res, _ := nextEvent(nlmsg(typ, 0, 0, 0, ifinfo(0, l.Type, int32(l.Index), flags, as...)), &c)
	if res != resEvent || !reflect.DeepEqual(got, ev) {
		t.Fatalf("round trip of %+v gave %+v (%v, stats %+v)", ev, got, res, c.snapshot())
	}
}
