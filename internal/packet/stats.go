package packet

// maxEtherTypes bounds the distinct non-IP ethertypes counted one by one;
// the rest land in Stats.NonIPOther, so counting never grows memory.
const maxEtherTypes = 32

// FragmentStats counts the fragment table's work.
type FragmentStats struct {
	First        uint64 // first fragments (offset 0, more-fragments set) whose ports were remembered
	Attributed   uint64 // later fragments given the ports of their first fragment
	Unattributed uint64 // later fragments decoded with ports 0 (first fragment unseen, expired or evicted)
	Evicted      uint64 // live entries overwritten because their probe window was full
}

// DecapStats counts the tunnels Config.Decap looked into, per Tunnel kind.
type DecapStats struct {
	// Inner counts tunnel packets keyed by the packet inside.
	Inner [NumTunnels]uint64
	// Outer counts tunnel packets of an enabled kind keyed by their outer
	// header instead: fragmented (counted once, at the first fragment), a
	// tunnel header weir does not take apart (GRE version 1 or routing,
	// ERSPAN, VXLAN without its I flag, Geneve version > 0), or an inner
	// packet that is not IP or could not be read (cut by the snap length,
	// malformed).
	Outer [NumTunnels]uint64
}

// Stats counts what a Decoder saw. Every frame is counted once in Frames
// and in exactly one of Decoded, NonIP or Errors, so
// Frames == Decoded + NonIP + TotalErrors().
//
// A Decoder's Stats are not safe for concurrent use: give each worker its
// own Decoder and sum the copies with Add.
type Stats struct {
	Frames            uint64             // frames passed to Decode
	Decoded           uint64             // frames that produced a flow packet (IPv4 + IPv6)
	IPv4              uint64             // decoded IPv4 packets
	IPv6              uint64             // decoded IPv6 packets
	NonIP             uint64             // non-IP frames (ARP, LLDP, 802.3/LLC, …): LLC + LinkOther + NonIPOther + per-ethertype counts
	LLC               uint64             // frames with an 802.3 length field instead of an ethertype
	LinkOther         uint64             // non-IP frames of link types without an ethertype: a BSD loopback or NFLOG address family, a netlink capture
	NonIPOther        uint64             // non-IP frames whose ethertype found no free counting slot
	IPLengthFromFrame uint64             // IP length 0 in the header (TSO/BIG TCP): taken from the frame length
	CutHeaders        uint64             // IPv4 options or IPv6 extension headers cut by the snap length: counted in a portless flow
	Fragments         FragmentStats      // fragment table counters
	Decap             DecapStats         // tunnels looked into (Config.Decap)
	Errors            [NumReasons]uint64 // rejected frames, indexed by Reason

	etherTypes    [maxEtherTypes]uint16
	etherCounts   [maxEtherTypes]uint64
	numEtherTypes int
}

// countEtherType adds n frames of a non-IP ethertype: a linear scan of a
// small fixed array instead of a map, so nothing grows on the hot path.
func (s *Stats) countEtherType(et uint16, n uint64) {
	for i := 0; i < s.numEtherTypes; i++ {
		if s.etherTypes[i] == et {
			s.etherCounts[i] += n
			return
		}
	}
	if s.numEtherTypes < maxEtherTypes {
		s.etherTypes[s.numEtherTypes] = et
		s.etherCounts[s.numEtherTypes] = n
		s.numEtherTypes++
		return
	}
	s.NonIPOther += n
}

// TotalErrors returns the sum of Errors.
func (s *Stats) TotalErrors() uint64 {
	var n uint64
	for _, c := range s.Errors {
		n += c
	}
	return n
}

// EachEtherType calls fn for every non-IP ethertype counted one by one, in
// the order first seen. LLC and NonIPOther are not included.
func (s *Stats) EachEtherType(fn func(etherType uint16, count uint64)) {
	for i := 0; i < s.numEtherTypes; i++ {
		fn(s.etherTypes[i], s.etherCounts[i])
	}
}

// EachNonIP calls fn with a printable name for every non-IP bucket with a
// non-zero count: "llc", "link_other", each ethertype (EtherTypeName), then
// "other".
func (s *Stats) EachNonIP(fn func(name string, count uint64)) {
	if s.LLC != 0 {
		fn("llc", s.LLC)
	}
	if s.LinkOther != 0 {
		fn("link_other", s.LinkOther)
	}
	for i := 0; i < s.numEtherTypes; i++ {
		fn(EtherTypeName(s.etherTypes[i]), s.etherCounts[i])
	}
	if s.NonIPOther != 0 {
		fn("other", s.NonIPOther)
	}
}

// EachError calls fn with the name and count of every Reason whose count is
// non-zero, in Reason order.
func (s *Stats) EachError(fn func(reason string, count uint64)) {
	for i, c := range s.Errors {
		if c != 0 {
			fn(Reason(i).String(), c)
		}
	}
}

// Add adds o's counters to s, so per-worker stats can be summed.
func (s *Stats) Add(o *Stats) {
	s.Frames += o.Frames
	s.Decoded += o.Decoded
	s.IPv4 += o.IPv4
	s.IPv6 += o.IPv6
	s.NonIP += o.NonIP
	s.LLC += o.LLC
	s.LinkOther += o.LinkOther
	s.NonIPOther += o.NonIPOther
	s.IPLengthFromFrame += o.IPLengthFromFrame
	s.CutHeaders += o.CutHeaders
	for i := range s.Decap.Inner {
		s.Decap.Inner[i] += o.Decap.Inner[i]
		s.Decap.Outer[i] += o.Decap.Outer[i]
	}
	s.Fragments.First += o.Fragments.First
	s.Fragments.Attributed += o.Fragments.Attributed
	s.Fragments.Unattributed += o.Fragments.Unattributed
	s.Fragments.Evicted += o.Fragments.Evicted
	for i := range s.Errors {
		s.Errors[i] += o.Errors[i]
	}
	for i := 0; i < o.numEtherTypes; i++ {
		s.countEtherType(o.etherTypes[i], o.etherCounts[i])
	}
}

// EtherTypeName returns a short name for well-known ethertypes and
// "0x%04x" for the rest.
func EtherTypeName(et uint16) string {
	switch et {
	case 0x0806:
		return "arp"
	case 0x8035:
		return "rarp"
	case 0x88cc:
		return "lldp"
	case 0x8863:
		return "pppoe_discovery"
	case 0x8864:
		return "pppoe_session"
	case 0x8847:
		return "mpls"
	case 0x8848:
		return "mpls_multicast"
	case 0x888e:
		return "eapol"
	case 0x88f7:
		return "ptp"
	case 0x8809:
		return "slow_protocols"
	case 0x8137:
		return "ipx"
	case 0x88e5:
		return "macsec"
	case 0x880b:
		return "ppp"
	case 0x6558:
		return "ethernet_bridging"
	case 0x88be:
		return "erspan"
	case 0x8906:
		return "fcoe"
	case 0x22f0:
		return "avtp"
	case 0x893a:
		return "ieee1905"
	}
	const hex = "0123456789abcdef"
	return string([]byte{'0', 'x', hex[et>>12], hex[et>>8&0xf], hex[et>>4&0xf], hex[et&0xf]})
}
