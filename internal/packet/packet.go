// # What a Decoder returns
//
// Decode fills a flow.Packet with the Key in wire orientation (Src sent the
// packet), Length = the IP total length (IPv4 Total Length; IPv6 40 +
// Payload Length, or 40 + the Jumbo Payload length), the TCP flags byte,
// and a Role hint: TCP SYN without ACK is an initiator, SYN+ACK a
// responder; ICMP/ICMPv6 replies are keyed under their request type (echo
// reply 0 → 8, 14 → 13, 16 → 15, 18 → 17, ICMPv6 129 → 128, 140 → 139) so
// a ping is one bidirectional flow, requests being initiators and replies
// responders. Other ICMP types keep their own type. Protocols without
// ports (GRE, ESP, OSPF, …) are keyed by protocol alone.
//
// # Link layers and encapsulations
//
// Ethernet (with up to MaxVLANTags 802.1Q/802.1ad tags), Linux cooked
// captures v1 and v2 (the protocol field is an ethertype for every ARPHRD
// type that carries IP: Ethernet, PPP, IP tunnels and tun devices; GRE
// devices' 0x6558 is a bridged Ethernet frame; Linux's own 0x0007 is a PPP
// frame; a netlink capture carries no IP), raw IP, BSD loopback
// (LINKTYPE_NULL and LOOP: address family 2 for IPv4, 24, 28 or 30 for
// IPv6, in either byte order; as Wireshark reads them, a value above 1500
// is an ethertype and a frame starting ff 03 is PPP), NFLOG (the
// NFULA_PAYLOAD TLV, by the record's family or the packet header's
// ethertype), PPP with or without HDLC address and control bytes and with
// 1- or 2-byte protocol fields, Cisco HDLC, and PPPoE without Ethernet
// (LINKTYPE_PPP_ETHER). Inside Ethernet: PPPoE sessions (PPP protocols
// 0x0021 IPv4, 0x0057 IPv6, 0x0281/0x0283 MPLS), MPLS label stacks up to
// MaxMPLSLabels deep, followed by IPv4 or IPv6 by the first nibble after
// the bottom of the stack, or, when that nibble is 0, an Ethernet
// pseudowire: an RFC 4448 control word and an Ethernet frame, unless the
// frame plainly starts right away (a common ethertype where a header
// without control word has it, and none after a control word). A
// pseudowire without control word whose MAC address begins with 4 or 6 is
// read as IP: RFC 4928 is why pseudowires carry a control word. At most
// MaxEncapsulations Ethernet headers nest in one frame.
//
// The packet is keyed by its outermost IP header. Non-IP frames are
// counted by the ethertype that carries them (a PPP control protocol under
// PPPoE's ethertype, or PPP's 0x880b on PPP links), or as LinkOther for
// link types without one.
//
// # Tunnels
//
// Tunnels (VXLAN, Geneve, GRE, IP-in-IP, ERSPAN, ESP, …) are keyed by
// their outer header. With Config.Decap, the packets of the listed tunnel
// kinds are keyed by the packet inside instead (its key, its IP length,
// its TCP flags and role; the outer frame's VLAN), and Outer reports the
// outer header's addresses: VXLAN (UDP to 4789 or 8472, I flag set),
// Geneve (UDP to 6081, version 0: Ethernet, IPv4 or IPv6 inside), GRE
// (version 0 without source routing; checksum, key and sequence fields
// skipped; IPv4, IPv6, MPLS or 0x6558 Ethernet inside) and IP-in-IP
// (protocol 4 or 41, in IPv4 or IPv6). One level is opened: a tunnel
// inside a tunnel is keyed by the inner tunnel's header. A fragmented
// tunnel packet, a tunnel header weir does not open (ERSPAN, GRE version 1)
// or an inner packet that is not IP or cannot be read is keyed by the outer
// header and counted in Stats.Decap.Outer; nothing of it is counted as an
// error or non-IP.
//
// # Lengths
//
// The IP length comes from the IP header, never from len(data): data may be
// cut short by the snap length. A header length of 0 is what segmentation
// offload leaves in the super-packets a host captures before its NIC cuts
// them (TSO, BIG TCP): only there is it replaced by the frame length from
// the IP header on (Stats.IPLengthFromFrame), that is for IPv4 TCP and UDP
// that are not later fragments, and IPv6 whose TCP or UDP header follows
// the fixed header (BIG TCP since Linux dropped the hop-by-hop header); an
// IPv6 hop-by-hop header with a Jumbo Payload option gives the length.
// Every other 0 is ReasonZeroIPLength; an IPv6 payload length of 0 with
// next header 59 (no next header) is taken as a genuinely empty packet. An
// IP length larger than the frame on the wire is malformed
// (ReasonIPLengthExceedsFrame); a frame longer than the IP length is just
// Ethernet padding. The transport header must be captured through what the
// key needs — the ports (TCP: through the flags byte; ICMP: type and code)
// — else the frame is ReasonTruncatedTransport; if the IP length itself is
// too short for it, ReasonHeaderExceedsIPLength. IPv4 options or an IPv6
// extension header cut by the snap length (the IP length says the frame
// held them) leave the packet in a portless flow, keyed with the IPv4
// protocol or the number of the extension header the capture ends in, and
// counted in Stats.CutHeaders: its bytes are not lost.
//
// # Protocols
//
// The key's protocol is the transport protocol after the IPv6 extension
// headers. An IPv6 Mobility (135), HIP (139) or Shim6 (140) header whose
// next header is 59 is the message itself: the packet is keyed with that
// header's number, as Wireshark shows it.
//
// # Fragments
//
// Only the first fragment of a datagram carries the transport header. The
// first fragment (offset 0, more-fragments set) is keyed with its ports and
// remembered in a fixed-size table keyed by (src, dst, protocol, ID) — the
// IPv4 Identification or the IPv6 Fragment header's 32-bit ID — for
// Config.FragmentTimeout of packet time. Later fragments (offset > 0) get
// the ports of their first fragment (Stats.Fragments.Attributed). A later
// fragment that cannot be attributed — its first fragment was not seen, has
// expired, was evicted, or has not arrived yet — is still returned as a flow
// packet with ports 0 so that no bytes are lost, and is counted in
// Stats.Fragments.Unattributed (an unattributed IPv6 fragment is keyed with
// its Fragment header's Next Header as the protocol). Later fragments carry
// no TCP flags and no Role. The table never grows: when a key's probe
// window is full the oldest entry is overwritten (Stats.Fragments.Evicted).
// Fragments are not reassembled and no payload is kept.
//
// # Bad input
//
// Decode never panics and never allocates. Every frame it does not turn into
// a flow packet is counted either as non-IP (per ethertype, in a fixed-size
// array) or under one Reason.
package packet

import (
	"encoding/binary"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// Defaults and bounds.
const (
	DefaultFragmentSlots   = 4096             // Config.FragmentSlots when 0
	DefaultFragmentTimeout = 30 * time.Second // Config.FragmentTimeout when 0
	MaxVLANTags            = 8                // stacked 802.1Q/802.1ad tags accepted (per Ethernet header)
	MaxMPLSLabels          = 16               // MPLS labels walked looking for bottom of stack
	MaxEncapsulations      = 4                // Ethernet headers nested in one frame (pseudowires, bridged GRE, VXLAN, Geneve)
	MaxIPv6ExtHeaders      = 8                // IPv6 extension headers walked before giving up
)

// Link-layer header sizes and offsets.
const (
	ethHeaderLen  = 14
	ethTypeOff    = 12
	sllHeaderLen  = 16
	sllHATypeOff  = 2
	sllProtoOff   = 14
	sll2HeaderLen = 20
	sll2ProtoOff  = 0
	sll2HATypeOff = 8
	vlanTagLen    = 4
)

// Ethertypes the decoder acts on. Values below ethMinType are 802.3 lengths.
const (
	ethMinType      = 0x0600
	ethTypeIPv4     = 0x0800
	ethTypeIPv6     = 0x86dd
	ethType8021Q    = 0x8100
	ethTypeQinQ     = 0x88a8
	ethType9100     = 0x9100
	ethTypePPPoE    = 0x8864 // PPPoE session stage
	ethTypeMPLS     = 0x8847
	ethTypeMPLSMC   = 0x8848
	ethTypeBridging = 0x6558 // transparent Ethernet bridging: an Ethernet frame follows (GRE, Geneve)
	ethTypePPP      = 0x880b // PPP; also the bucket non-IP PPP frames are counted in

	ethTypePPPoEDiscovery = 0x8863
	ethTypeARP            = 0x0806
	ethTypeLLDP           = 0x88cc
)

// Config sizes a Decoder. The zero value uses the defaults.
type Config struct {
	FragmentSlots   int           // size of the fragment-tracking table (default 4096; rounded up to a power of two)
	FragmentTimeout time.Duration // how long a first fragment's ports are remembered (default 30s, packet time)
	// Decap lists the tunnels whose packets are keyed by the packet inside
	// (see "Tunnels"); 0 keys every packet by its outermost IP header.
	Decap Decap
}

// Decoder turns captured frames into flow packets. It holds the fragment
// table and the counters, so it is not safe for concurrent use: use one per
// worker.
type Decoder struct {
	stats Stats
	frag  fragTable
	decap Decap
	inner bool  // decoding a tunnel's inner packet: failures fall back to the outer header, uncounted
	outer Outer // the last packet's outer header when it was keyed by its inner packet
}

// NewDecoder returns a Decoder; all its memory is allocated here.
func NewDecoder(cfg Config) *Decoder {
	slots := cfg.FragmentSlots
	if slots <= 0 {
		slots = DefaultFragmentSlots
	}
	timeout := cfg.FragmentTimeout
	if timeout <= 0 {
		timeout = DefaultFragmentTimeout
	}
	return &Decoder{frag: newFragTable(slots, int64(timeout)), decap: cfg.Decap}
}

// Stats returns the decoder's counters. The pointer stays valid; read it
// from the decoding goroutine (or copy it there).
func (d *Decoder) Stats() *Stats { return &d.stats }

// fail counts a rejected frame. Inside a tunnel nothing is counted: the
// caller keys the packet by its outer header instead.
func (d *Decoder) fail(r Reason) bool {
	if !d.inner {
		d.stats.Errors[r]++
	}
	return false
}

// Decode decodes one frame. The caller has set p.Time and p.Iface; Decode
// sets p.Key, p.Length, p.TCPFlags, p.Role and p.VLAN. wireLen is the
// frame's length on the wire (0 if unknown); data may be shorter (snap
// length). It returns true if the frame contributes to a flow, false if it
// was non-IP or malformed (already counted in Stats).
func (d *Decoder) Decode(link LinkType, data []byte, wireLen int, p *flow.Packet) bool {
	d.stats.Frames++
	p.Key = flow.Key{}
	p.Length, p.TCPFlags, p.Role, p.VLAN = 0, 0, flow.RoleUnknown, 0
	d.outer.IPVersion = 0
	if wireLen > 0 && wireLen < len(data) {
		wireLen = len(data) // a source bug; never let the frame be shorter than what we hold
	}
	var et uint16
	var off int
	switch link {
	case LinkEthernet:
		if len(data) < ethHeaderLen {
			return d.fail(ReasonTruncatedLink)
		}
		et, off = binary.BigEndian.Uint16(data[ethTypeOff:]), ethHeaderLen
	case LinkSLL2:
		if len(data) < sll2HeaderLen {
			return d.fail(ReasonTruncatedLink)
		}
		et, off = binary.BigEndian.Uint16(data[sll2ProtoOff:]), sll2HeaderLen
		if hatype := binary.BigEndian.Uint16(data[sll2HATypeOff:]); hatype == arphrdNetlink || et == sllPPPHDLC {
			return d.cooked(data, et, hatype, off, wireLen, p)
		}
	case LinkSLL:
		if len(data) < sllHeaderLen {
			return d.fail(ReasonTruncatedLink)
		}
		et, off = binary.BigEndian.Uint16(data[sllProtoOff:]), sllHeaderLen
		if hatype := binary.BigEndian.Uint16(data[sllHATypeOff:]); hatype == arphrdNetlink || et == sllPPPHDLC {
			return d.cooked(data, et, hatype, off, wireLen, p)
		}
	case LinkRaw:
		return d.rawIP(data, 0, wireLen, p)
	case LinkIPv4:
		return d.ipv4(data, 0, wireLen, p)
	case LinkIPv6:
		return d.ipv6(data, 0, wireLen, p)
	default:
		return d.otherLink(link, data, wireLen, p)
	}
	// Untagged IP, the common case, goes straight to the IP decoder.
	switch et {
	case ethTypeIPv4:
		return d.ipv4(data, off, wireLen, p)
	case ethTypeIPv6:
		return d.ipv6(data, off, wireLen, p)
	}
	return d.ether(data, et, off, wireLen, p, 0)
}

// ether decodes what follows an ethertype et, from data[off:]: VLAN tags,
// PPPoE, MPLS, a bridged Ethernet frame, IP. depth counts the Ethernet
// headers around it (0 for the frame's own).
func (d *Decoder) ether(data []byte, et uint16, off, wireLen int, p *flow.Packet, depth int) bool {
	vlan := depth == 0 // the outermost 802.1Q tag's VLAN ID is the packet's
	for tags := 0; ; tags++ {
		switch et {
		case ethTypeIPv4:
			return d.ipv4(data, off, wireLen, p)
		case ethTypeIPv6:
			return d.ipv6(data, off, wireLen, p)
		case ethType8021Q, ethTypeQinQ, ethType9100:
			if tags == MaxVLANTags {
				return d.fail(ReasonTooManyVLANTags)
			}
			if len(data) < off+vlanTagLen {
				return d.fail(ReasonTruncatedVLAN)
			}
			if vlan {
				p.VLAN, vlan = binary.BigEndian.Uint16(data[off:])&0x0fff, false
			}
			et = binary.BigEndian.Uint16(data[off+2:])
			off += vlanTagLen
		case ethTypePPPoE:
			return d.pppoe(data, off, wireLen, p, depth)
		case ethTypeMPLS, ethTypeMPLSMC:
			return d.mpls(data, et, off, wireLen, p, depth)
		case ethTypeBridging:
			return d.bridged(data, off, wireLen, p, depth, ReasonTruncatedLink)
		case ethTypePBB:
			return d.bridged(data, off+pbbITagLen, wireLen, p, depth, ReasonTruncatedLink)
		case ethTypeFabricPath:
			return d.bridged(data, off+fabricPathTagLen, wireLen, p, depth, ReasonTruncatedLink)
		case ethTypeVNTag, ethTypeMACsec:
			next, n, ok := shim(data, et, off)
			if !ok {
				if n < 0 {
					return d.fail(ReasonTruncatedVLAN)
				}
				return d.nonIP(et) // MACsec with its user data encrypted or changed
			}
			if tags == MaxVLANTags {
				return d.fail(ReasonTooManyVLANTags)
			}
			et, off = next, off+n
		default:
			next, ok := llcSNAP(data, et, off)
			if !ok {
				return d.nonIP(et)
			}
			if tags == MaxVLANTags {
				return d.fail(ReasonTooManyVLANTags)
			}
			et, off = next, off+snapLen
		}
	}
}

// bridged decodes the Ethernet frame at data[off:] carried inside another
// protocol; short is the reason when the capture ends inside its header.
func (d *Decoder) bridged(data []byte, off, wireLen int, p *flow.Packet, depth int, short Reason) bool {
	if depth+1 >= MaxEncapsulations {
		return d.fail(ReasonTooManyEncapsulations)
	}
	if len(data) < off+ethHeaderLen {
		return d.fail(short)
	}
	return d.ether(data, binary.BigEndian.Uint16(data[off+ethTypeOff:]), off+ethHeaderLen, wireLen, p, depth+1)
}

// rawIP decodes an IP packet whose version only its first nibble tells.
func (d *Decoder) rawIP(data []byte, off, wireLen int, p *flow.Packet) bool {
	if len(data) <= off {
		return d.fail(ReasonTruncatedLink)
	}
	switch data[off] >> 4 {
	case 4:
		return d.ipv4(data, off, wireLen, p)
	case 6:
		return d.ipv6(data, off, wireLen, p)
	}
	return d.fail(ReasonBadIPVersion)
}

// nonIP counts a frame that carries no IP packet, by its ethertype, and
// returns false. Inside a tunnel it counts nothing (the outer header keys
// the packet).
func (d *Decoder) nonIP(et uint16) bool {
	if d.inner {
		return false
	}
	d.stats.NonIP++
	if et < ethMinType {
		d.stats.LLC++
		return false
	}
	d.stats.countEtherType(et, 1)
	return false
}

// nonIPLink counts a non-IP frame of a link type that has no ethertype.
func (d *Decoder) nonIPLink() bool {
	if d.inner {
		return false
	}
	d.stats.NonIP++
	d.stats.LinkOther++
	return false
}

// avail returns how many bytes the frame had on the wire from off on:
// the wire length if known, else what was captured.
func avail(data []byte, off, wireLen int) int {
	if wireLen > 0 {
		return wireLen - off
	}
	return len(data) - off
}
