package netdev

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// decodeAll walks a notification datagram the way Watcher.Next does.
func decodeAll(b []byte, c *counters) []Event {
	var evs []Event
	for len(b) > 0 {
		ev, res, rest := nextEvent(b, c)
		if res == resEvent {
			evs = append(evs, ev)
		}
		b = rest
	}
	return evs
}

func TestParseLinkGood(t *testing.T) {
	want := Link{Index: 12, Name: "veth0", Up: true, Running: true, Type: 1, Master: 7, Kind: "veth"}
	tests := []struct {
		name string
		msg  []byte
		want []Event
	}{
		{"newlink", vethMsg(rtmNewLink, 12, "veth0"), []Event{{Link: want}}},
		{"dellink", vethMsg(rtmDelLink, 12, "veth0"), []Event{{Link: want, Deleted: true}}},
		{"loopback without linkinfo", nlmsg(rtmNewLink, 0, 0, 0, ifinfo(0, tARPHRDLoopback, 1, tFlagUp|tFlagLoopback|tFlagRunning,
			strAttr(iflaIfname, "lo"))),
			[]Event{{Link: Link{Index: 1, Name: "lo", Up: true, Running: true, Loopback: true, Type: 772}}}},
		{"down, 15-byte name without NUL, linkinfo without kind", nlmsg(rtmNewLink, 0, 0, 0, ifinfo(0, 65534, 3, 0,
			attr{iflaIfname, []byte("abcdefghijklmno")}, nested(iflaLinkinfo, nested(2)))),
			[]Event{{Link: Link{Index: 3, Name: "abcdefghijklmno", Type: 65534}}}},
		{"name with bytes after the NUL", nlmsg(rtmNewLink, 0, 0, 0, ifinfo(0, 1, 4, tFlagUp,
			attr{iflaIfname, []byte("eth1\x00junk")})),
			[]Event{{Link: Link{Index: 4, Name: "eth1", Up: true, Type: 1}}}},
		{"repeated attribute: the last one wins", nlmsg(rtmNewLink, 0, 0, 0, ifinfo(0, 1, 5, 0,
			strAttr(iflaIfname, "first"), strAttr(iflaIfname, "second"))),
			[]Event{{Link: Link{Index: 5, Name: "second", Type: 1}}}},
		{"last attribute's padding missing from the message", func() []byte {
			m := nlmsg(rtmNewLink, 0, 0, 0, ifinfo(0, 1, 6, 0, strAttr(iflaIfname, "ab"))) // "ab\0" + 1 pad byte
			hostEndian.PutUint32(m, uint32(len(m)-1))                                      // nlmsg_len excludes the pad
			return m[:len(m)-1]
		}(), []Event{{Link: Link{Index: 6, Name: "ab", Type: 1}}}},
		{"three messages in one datagram", concat(vethMsg(rtmNewLink, 12, "veth0"), vethMsg(rtmNewLink, 13, "veth1"), vethMsg(rtmDelLink, 12, "veth0")),
			[]Event{{Link: want}, {Link: Link{Index: 13, Name: "veth1", Up: true, Running: true, Type: 1, Master: 7, Kind: "veth"}}, {Link: want, Deleted: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c counters
			got := decodeAll(tt.msg, &c)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("events:\n got %+v\nwant %+v", got, tt.want)
			}
			st := c.snapshot()
			if st.Messages != uint64(len(tt.want)) || st.Malformed != 0 || st.Ignored != 0 {
				t.Errorf("stats %+v, want %d messages, nothing malformed or ignored", st, len(tt.want))
			}
		})
	}
}

func TestParseIgnored(t *testing.T) {
	bridgePort := nlmsg(rtmDelLink, 0, 0, 0, ifinfo(tAFBridge, 1, 9, tFlagUp, strAttr(iflaIfname, "d1"), u32Attr(iflaMaster, 8)))
	done := nlmsg(nlmsgDone, 2 /* NLM_F_MULTI */, 1, 1, []byte{0, 0, 0, 0})
	noop := nlmsg(nlmsgNoop, 0, 0, 0, nil)
	addr := nlmsg(20 /* RTM_NEWADDR */, 0, 0, 0, []byte{2, 24, 0, 0, 1, 0, 0, 0})
	var c counters
	got := decodeAll(concat(bridgePort, done, noop, addr, vethMsg(rtmNewLink, 2, "x")), &c)
	if len(got) != 1 || got[0].Link.Name != "x" || got[0].Deleted {
		t.Fatalf("events %+v, want only the RTM_NEWLINK of x", got)
	}
	if st := c.snapshot(); st.Messages != 5 || st.Ignored != 4 || st.Malformed != 0 {
		t.Errorf("stats %+v, want 5 messages, 4 ignored (AF_BRIDGE, DONE, NOOP, NEWADDR), 0 malformed", st)
	}
}

func TestParseMalformed(t *testing.T) {
	good := vethMsg(rtmNewLink, 12, "veth0")
	setLen := func(m []byte, n uint32) []byte {
		m = append([]byte(nil), m...)
		hostEndian.PutUint32(m, n)
		return m
	}
	body := func(b []byte) []byte { return nlmsg(rtmNewLink, 0, 0, 0, b) }
	tests := []struct {
		name   string
		msg    []byte
		reason Reason
		events int // good events decoded around the bad one
	}{
		{"short header", good[:15], ReasonShortHeader, 0},
		{"good then a short tail", append(append([]byte(nil), good...), 1, 2, 3, 4, 5), ReasonShortHeader, 1},
		{"nlmsg_len zero (would loop)", setLen(good, 0), ReasonBadLength, 0},
		{"nlmsg_len below header", setLen(good, 15), ReasonBadLength, 0},
		{"nlmsg_len past the end", setLen(good, uint32(len(good)+4)), ReasonBadLength, 0},
		{"nlmsg_len huge", setLen(good, 0xffffffff), ReasonBadLength, 0},
		{"bad header after a good message drops the rest", concat(good, setLen(good, 3), good), ReasonBadLength, 1},
		{"no ifinfomsg", body(nil), ReasonShortBody, 0},
		{"short ifinfomsg", body(make([]byte, 15)), ReasonShortBody, 0},
		{"bad body is skipped, next message decoded", concat(body(make([]byte, 8)), good), ReasonShortBody, 1},
		{"index 0", body(ifinfo(0, 1, 0, 0, strAttr(iflaIfname, "a"))), ReasonBadIndex, 0},
		{"negative index", body(ifinfo(0, 1, -5, 0, strAttr(iflaIfname, "a"))), ReasonBadIndex, 0},
		{"zero-length attribute (would loop)", body(append(ifinfo(0, 1, 2, 0), 0, 0, 3, 0, 'a', 0, 0, 0)), ReasonBadAttr, 0},
		{"attribute length 3", body(append(ifinfo(0, 1, 2, 0), 3, 0, 3, 0, 'a', 0, 0, 0)), ReasonBadAttr, 0},
		{"attribute past the message end", body(append(ifinfo(0, 1, 2, 0), 40, 0, 3, 0, 'a', 0, 0, 0)), ReasonBadAttr, 0},
		{"attribute past the message but inside the datagram", concat(body(append(ifinfo(0, 1, 2, 0), 24, 0, 3, 0, 'a', 0, 0, 0)), good), ReasonBadAttr, 1},
		{"master of 2 bytes", body(ifinfo(0, 1, 2, 0, strAttr(iflaIfname, "a"), attr{iflaMaster, []byte{1, 0}})), ReasonBadAttr, 0},
		{"bad nested attribute in linkinfo", body(ifinfo(0, 1, 2, 0, strAttr(iflaIfname, "a"), attr{iflaLinkinfo, []byte{0, 0, 1, 0}})), ReasonBadAttr, 0},
		{"kind longer than 64 bytes", body(ifinfo(0, 1, 2, 0, strAttr(iflaIfname, "a"),
			nested(iflaLinkinfo, strAttr(iflaInfoKind, strings.Repeat("k", 65))))), ReasonBadAttr, 0},
		{"no name", body(ifinfo(0, 1, 2, tFlagUp)), ReasonNoName, 0},
		{"empty name", body(ifinfo(0, 1, 2, 0, strAttr(iflaIfname, ""))), ReasonBadName, 0},
		{"name of 16 bytes", body(ifinfo(0, 1, 2, 0, strAttr(iflaIfname, "abcdefghijklmnop"))), ReasonBadName, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c counters
			got := decodeAll(tt.msg, &c)
			if len(got) != tt.events {
				t.Errorf("%d events %+v, want %d", len(got), got, tt.events)
			}
			st := c.snapshot()
			if st.Malformed != 1 || st.ByReason[tt.reason] != 1 {
				t.Errorf("malformed %d, by reason %v, want exactly one %v", st.Malformed, st.ByReason, tt.reason)
			}
		})
	}
}

func TestReasonString(t *testing.T) {
	seen := map[string]bool{}
	for r := range NumReasons {
		s := r.String()
		if s == "" || s == "unknown" || seen[s] {
			t.Errorf("Reason(%d).String() = %q: empty, unknown or repeated", r, s)
		}
		seen[s] = true
	}
	if s := NumReasons.String(); s != "unknown" {
		t.Errorf("NumReasons.String() = %q, want unknown", s)
	}
}

func BenchmarkParseLink(b *testing.B) {
	msg := vethMsg(rtmNewLink, 12, "veth0")
	var c counters
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, res, _ := nextEvent(msg, &c); res != resEvent {
			b.Fatal("not an event")
		}
	}
}

// Real kernel messages (the fuzz corpus written by TestWriteCorpus) are
// never malformed, and carry the links the generator created.
func TestRealMessages(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzParseLink", "real-*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no real messages in testdata (%v)", err)
	}
	var c counters
	names := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s, ok := strings.CutPrefix(string(raw), "go test fuzz v1\n[]byte(")
		s, ok2 := strings.CutSuffix(s, ")\n")
		b, err := strconv.Unquote(s)
		if !ok || !ok2 || err != nil {
			t.Fatalf("%s: not a []byte corpus entry (%v)", f, err)
		}
		for _, ev := range decodeAll([]byte(b), &c) {
			names[ev.Link.Name] = true
		}
	}
	if st := c.snapshot(); st.Malformed != 0 {
		t.Errorf("real messages counted malformed: %+v", st)
	}
	for _, n := range []string{"lo", "br0", "port0"} {
		if !names[n] {
			t.Errorf("no event for %q in the real messages (have %v)", n, names)
		}
	}
}
