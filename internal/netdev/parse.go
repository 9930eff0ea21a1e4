package netdev

import "encoding/binary"

// rtnetlink wire constants (linux/netlink.h, linux/rtnetlink.h,
// linux/if_link.h, linux/if.h), spelled out here so that the decoder builds
// and is fuzzed on every platform. Netlink integers are in host byte order.
const (
	nlmsgHdrLen  = 16 // struct nlmsghdr: len u32, type u16, flags u16, seq u32, pid u32
	ifinfomsgLen = 16 // struct ifinfomsg: family u8, pad u8, type u16, index s32, flags u32, change u32
	rtattrHdrLen = 4  // struct rtattr: len u16, type u16

	nlmsgNoop    = 1
	nlmsgError   = 2
	nlmsgDone    = 3
	rtmNewLink   = 16
	rtmDelLink   = 17
	rtmGetLink   = 18
	nlmFRequest  = 0x1
	nlmFDumpIntr = 0x10  // NLM_F_DUMP_INTR: the dump was inconsistent, redo it
	nlmFDump     = 0x300 // NLM_F_ROOT | NLM_F_MATCH
	nlaTypeMask  = 0x3fff

	iflaIfname   = 3
	iflaMaster   = 10
	iflaLinkinfo = 18
	iflaExtMask  = 29
	iflaInfoKind = 1

	rtextFilterSkipStats = 1 << 3 // RTEXT_FILTER_SKIP_STATS: smaller dump messages

	iffUp       = 0x1
	iffLoopback = 0x8
	iffRunning  = 0x40

	afUnspec = 0  // family of real link messages; AF_BRIDGE (7) ones describe bridge ports
	ifNamSiz = 16 // IFNAMSIZ, terminating NUL included
	maxKind  = 64 // longest IFLA_INFO_KIND accepted (the kernel's are short words)
)

var ne = binary.NativeEndian

// nlHeader is a decoded struct nlmsghdr.
type nlHeader struct {
	Len   uint32
	Type  uint16
	Flags uint16
	Seq   uint32
	Pid   uint32
}

// align4 rounds n up to a multiple of 4 (NLMSG_ALIGN, RTA_ALIGN).
func align4(n int) int { return (n + 3) &^ 3 }

// splitMessage takes the first netlink message off b. On a malformed
// header it returns the reason and rest == nil: the datagram cannot be
// resynchronised, so what follows is dropped with it. rest is always
// shorter than b, so a loop over splitMessage ends.
func splitMessage(b []byte) (h nlHeader, body, rest []byte, r Reason) {
	if len(b) < nlmsgHdrLen {
		return h, nil, nil, ReasonShortHeader
	}
	_ = b[nlmsgHdrLen-1] // bounds-check hint for the fixed-offset reads below
	h = nlHeader{
		Len:   ne.Uint32(b[0:4]),
		Type:  ne.Uint16(b[4:6]),
		Flags: ne.Uint16(b[6:8]),
		Seq:   ne.Uint32(b[8:12]),
		Pid:   ne.Uint32(b[12:16]),
	}
	if h.Len < nlmsgHdrLen || uint64(h.Len) > uint64(len(b)) {
		return h, nil, nil, ReasonBadLength
	}
	n := int(h.Len)
	next := min(align4(n), len(b)) // the last message's padding may be missing
	return h, b[nlmsgHdrLen:n], b[next:], ReasonNone
}

// parseLink decodes the body of an RTM_NEWLINK/RTM_DELLINK message
// (struct ifinfomsg and its attributes) and returns the address family
// (afUnspec for real link messages). Unknown attributes are skipped;
// a later copy of a known attribute replaces an earlier one.
func parseLink(b []byte) (l Link, family uint8, r Reason) {
	if len(b) < ifinfomsgLen {
		return Link{}, 0, ReasonShortBody
	}
	_ = b[ifinfomsgLen-1]
	family = b[0]
	l.Type = ne.Uint16(b[2:4])
	index := int32(ne.Uint32(b[4:8]))
	flags := ne.Uint32(b[8:12])
	if index <= 0 {
		return Link{}, family, ReasonBadIndex
	}
	l.Index = int(index)
	l.Up = flags&iffUp != 0
	l.Running = flags&iffRunning != 0
	l.Loopback = flags&iffLoopback != 0
	var name []byte
	haveName := false
	for a := b[ifinfomsgLen:]; len(a) >= rtattrHdrLen; {
		typ, val, rest, ok := splitAttr(a)
		if !ok {
			return Link{}, family, ReasonBadAttr
		}
		a = rest
		switch typ {
		case iflaIfname:
			name, haveName = cString(val), true
		case iflaMaster:
			if len(val) != 4 {
				return Link{}, family, ReasonBadAttr
			}
			l.Master = int(int32(ne.Uint32(val))) // a negative index cannot exist: treat as none
			if l.Master < 0 {
				l.Master = 0
			}
		case iflaLinkinfo:
			kind, ok := infoKind(val)
			if !ok {
				return Link{}, family, ReasonBadAttr
			}
			l.Kind = kind
		}
	}
	if !haveName {
		return Link{}, family, ReasonNoName
	}
	if len(name) == 0 || len(name) >= ifNamSiz {
		return Link{}, family, ReasonBadName
	}
	l.Name = string(name)
	return l, family, ReasonNone
}

// splitAttr takes the first attribute off a (len(a) >= 4). ok is false if
// its length is below the header size or past the end of a. rest is always
// shorter than a, so attribute walks end.
func splitAttr(a []byte) (typ uint16, val, rest []byte, ok bool) {
	_ = a[rtattrHdrLen-1]
	n := int(ne.Uint16(a[0:2]))
	typ = ne.Uint16(a[2:4]) & nlaTypeMask // drop NLA_F_NESTED / NLA_F_NET_BYTEORDER
	if n < rtattrHdrLen || n > len(a) {
		return 0, nil, nil, false
	}
	return typ, a[rtattrHdrLen:n], a[min(align4(n), len(a)):], true
}

// infoKind finds IFLA_INFO_KIND inside a nested IFLA_LINKINFO. An absent
// kind is "" and ok; a malformed nested attribute or an over-long kind is
// not ok.
func infoKind(b []byte) (string, bool) {
	kind := ""
	for len(b) >= rtattrHdrLen {
		typ, val, rest, ok := splitAttr(b)
		if !ok {
			return "", false
		}
		b = rest
		if typ == iflaInfoKind {
			k := cString(val)
			if len(k) > maxKind {
				return "", false
			}
			kind = internKind(k)
		}
	}
	return kind, true
}

// internKind returns common kinds without allocating (a switch on
// string(b) compares in place), other kinds as a new string.
func internKind(b []byte) string {
	switch string(b) {
	case "veth":
		return "veth"
	case "bridge":
		return "bridge"
	case "dummy":
		return "dummy"
	case "vlan":
		return "vlan"
	case "bond":
		return "bond"
	case "tun":
		return "tun"
	case "vxlan":
		return "vxlan"
	case "macvlan":
		return "macvlan"
	case "ipvlan":
		return "ipvlan"
	case "geneve":
		return "geneve"
	case "wireguard":
		return "wireguard"
	case "ifb":
		return "ifb"
	case "vrf":
		return "vrf"
	}
	return string(b)
}

// cString cuts b at its first NUL (netlink strings are NUL-terminated; a
// missing terminator is tolerated).
func cString(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// decodeResult says what one message of a notification datagram was.
type decodeResult uint8

const (
	resIgnored   decodeResult = iota // well-formed, not a link event
	resEvent                         // a link event
	resMalformed                     // skipped; the reason is counted
	resStop                          // malformed header: the rest of the datagram is dropped
)

// nextEvent takes one message off the front of a notification datagram,
// counts it in c, and decodes it into ev when it is a link event. It
// returns the rest of the datagram (nil after resStop or at its end).
func nextEvent(b []byte, c *counters) (ev Event, res decodeResult, rest []byte) {
	h, body, rest, r := splitMessage(b)
	if r != ReasonNone {
		c.messages.Add(1)
		c.malformed(r)
		return Event{}, resStop, nil
	}
	c.messages.Add(1)
	if h.Type != rtmNewLink && h.Type != rtmDelLink {
		c.ignored.Add(1)
		return Event{}, resIgnored, rest
	}
	l, fam, r := parseLink(body)
	if r != ReasonNone {
		c.malformed(r)
		return Event{}, resMalformed, rest
	}
	if fam != afUnspec {
		c.ignored.Add(1) // AF_BRIDGE: a port joined/left a bridge, the device itself is unchanged
		return Event{}, resIgnored, rest
	}
	return Event{Link: l, Deleted: h.Type == rtmDelLink}, resEvent, rest
}
