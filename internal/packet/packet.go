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
// # Lengths
//
// The IP length comes from the IP header, never from len(data): data may be
// cut short by the snap length. A header length of 0 (TSO / BIG TCP
// captures) is replaced by the frame length from the IP header on
// (Stats.IPLengthFromFrame); an IPv6 payload length of 0 with next header
// 59 (no next header) is taken as a genuinely empty packet. An IP length larger than the frame on the wire
// is malformed (ReasonIPLengthExceedsFrame); a frame longer than the IP
// length is just Ethernet padding. The transport header must be captured
// through what the key needs — the ports (TCP: through the flags byte; ICMP:
// type and code) — else the frame is ReasonTruncatedTransport; if the IP
// length itself is too short for it, ReasonHeaderExceedsIPLength.
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
	MaxVLANTags            = 8                // stacked 802.1Q/802.1ad tags accepted
	MaxIPv6ExtHeaders      = 8                // IPv6 extension headers walked before giving up
)

// Link-layer header sizes and offsets.
const (
	ethHeaderLen  = 14
	ethTypeOff    = 12
	sllHeaderLen  = 16
	sllProtoOff   = 14
	sll2HeaderLen = 20
	sll2ProtoOff  = 0
	vlanTagLen    = 4
)

// Ethertypes the decoder acts on. Values below ethMinType are 802.3 lengths.
const (
	ethMinType   = 0x0600
	ethTypeIPv4  = 0x0800
	ethTypeIPv6  = 0x86dd
	ethType8021Q = 0x8100
	ethTypeQinQ  = 0x88a8
	ethType9100  = 0x9100
)

// Config sizes a Decoder. The zero value uses the defaults.
type Config struct {
	FragmentSlots   int           // size of the fragment-tracking table (default 4096; rounded up to a power of two)
	FragmentTimeout time.Duration // how long a first fragment's ports are remembered (default 30s, packet time)
}

// Decoder turns captured frames into flow packets. It holds the fragment
// table and the counters, so it is not safe for concurrent use: use one per
// worker.
type Decoder struct {
	stats Stats
	frag  fragTable
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
	return &Decoder{frag: newFragTable(slots, int64(timeout))}
}

// Stats returns the decoder's counters. The pointer stays valid; read it
// from the decoding goroutine (or copy it there).
func (d *Decoder) Stats() *Stats { return &d.stats }

// fail counts a rejected frame.
func (d *Decoder) fail(r Reason) bool {
	d.stats.Errors[r]++
	return false
}

// Decode decodes one frame. The caller has set p.Time and p.Iface; Decode
// sets p.Key, p.Length, p.TCPFlags and p.Role. wireLen is the frame's
// length on the wire (0 if unknown); data may be shorter (snap length).
// It returns true if the frame contributes to a flow, false if it was non-IP
// or malformed (already counted in Stats).
func (d *Decoder) Decode(link LinkType, data []byte, wireLen int, p *flow.Packet) bool {
	d.stats.Frames++
	p.Key = flow.Key{}
	p.Length, p.TCPFlags, p.Role, p.VLAN = 0, 0, flow.RoleUnknown, 0
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
	case LinkSLL:
		if len(data) < sllHeaderLen {
			return d.fail(ReasonTruncatedLink)
		}
		et, off = binary.BigEndian.Uint16(data[sllProtoOff:]), sllHeaderLen
	case LinkRaw:
		if len(data) == 0 {
			return d.fail(ReasonTruncatedLink)
		}
		switch data[0] >> 4 {
		case 4:
			return d.ipv4(data, 0, wireLen, p)
		case 6:
			return d.ipv6(data, 0, wireLen, p)
		}
		return d.fail(ReasonBadIPVersion)
	case LinkIPv4:
		return d.ipv4(data, 0, wireLen, p)
	case LinkIPv6:
		return d.ipv6(data, 0, wireLen, p)
	default:
		return d.fail(ReasonUnknownLinkType)
	}
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
			if tags == 0 {
				p.VLAN = binary.BigEndian.Uint16(data[off:]) & 0x0fff // outermost tag's VLAN ID
			}
			et = binary.BigEndian.Uint16(data[off+2:])
			off += vlanTagLen
		default:
			d.nonIP(et)
			return false
		}
	}
}

// nonIP counts a frame that carries no IP packet.
func (d *Decoder) nonIP(et uint16) {
	d.stats.NonIP++
	if et < ethMinType {
		d.stats.LLC++
		return
	}
	d.stats.countEtherType(et, 1)
}

// avail returns how many bytes the frame had on the wire from off on:
// the wire length if known, else what was captured.
func avail(data []byte, off, wireLen int) int {
	if wireLen > 0 {
		return wireLen - off
	}
	return len(data) - off
}
