package ipfix

import (
	"encoding/binary"
	"net/netip"

	"github.com/weir-dev/weir/internal/flow"
)

// NetFlow v9 (RFC 3954) and v5 header and record sizes.
const (
	v9HeaderLen = 20
	v5HeaderLen = 24
	v5RecordLen = 48
	v5MaxCount  = 30 // the v5 format's own limit per datagram
)

// decodeV9 decodes a NetFlow v9 packet: the IPFIX structure with a
// 20-byte header (sysUptime, Unix seconds, a packet sequence number, the
// source id as domain), flowset ids 0 and 1 for templates and options
// templates, no enterprise fields and no variable lengths.
func (d *Decoder) decodeV9(from netip.AddrPort, msg []byte, emit func(*flow.Record)) error {
	be := binary.BigEndian
	if len(msg) < v9HeaderLen {
		return d.fail(ErrShortHeader, "v9: %d bytes", len(msg))
	}
	d.stats.Messages[1]++
	hdr := msgHeader{uptime: int64(be.Uint32(msg[4:])), export: int64(be.Uint32(msg[8:])), version: 9}
	seq, domain := be.Uint32(msg[12:]), be.Uint32(msg[16:])
	s, err := d.session(sessionKey{from, domain, 9})
	if err != nil {
		return err
	}
	d.cur = s
	defer func() { d.cur = nil }()
	now := s.seen
	d.expire(s, now)
	d.sequence(s, seq, seq+1, 1, true) // v9 numbers export packets
	for p := v9HeaderLen; p+4 <= len(msg); {
		id, sl := be.Uint16(msg[p:]), int(be.Uint16(msg[p+2:]))
		if sl < 4 || p+sl > len(msg) {
			return d.fail(ErrBadSetLength, "v9 flowset %d of %d bytes at %d of %d", id, sl, p, len(msg))
		}
		body := msg[p+4 : p+sl]
		p += sl
		switch {
		case id == 0 || id == 1:
			if err := d.templateSet(s, body, id == 1, true, now); err != nil {
				return err
			}
		case id >= 256:
			if err := d.dataSet(s, id, body, &hdr, now, emit); err != nil {
				return err
			}
		default:
			d.stats.SkippedSets++
		}
	}
	return nil // under 4 bytes left: padding
}

// decodeV5 decodes a NetFlow v5 packet: fixed 48-byte unidirectional
// IPv4 records with times in the exporter's uptime.
func (d *Decoder) decodeV5(from netip.AddrPort, msg []byte, emit func(*flow.Record)) error {
	be := binary.BigEndian
	if len(msg) < v5HeaderLen {
		return d.fail(ErrShortHeader, "v5: %d bytes", len(msg))
	}
	count := int(be.Uint16(msg[2:]))
	if count > v5MaxCount || len(msg) != v5HeaderLen+count*v5RecordLen {
		return d.fail(ErrBadCount, "v5: count %d in %d bytes", count, len(msg))
	}
	d.stats.Messages[0]++
	uptime := int64(be.Uint32(msg[4:]))
	export := int64(be.Uint32(msg[8:]))*1e9 + int64(be.Uint32(msg[12:]))
	seq := be.Uint32(msg[16:])
	domain := uint32(msg[20])<<8 | uint32(msg[21]) // engine type and id
	s, err := d.session(sessionKey{from, domain, 5})
	if err != nil {
		return err
	}
	d.cur = s
	defer func() { d.cur = nil }()
	var sampling uint32
	if si := be.Uint16(msg[22:]) & 0x3fff; si > 1 {
		s.sampling, sampling = uint32(si), uint32(si)
	}
	d.sequence(s, seq, seq+uint32(count), uint32(count), false) // v5 numbers flows
	for i := 0; i < count; i++ {
		b := msg[v5HeaderLen+i*v5RecordLen : v5HeaderLen+(i+1)*v5RecordLen]
		r := &d.rec
		*r = flow.Record{}
		r.Key.IPVersion, r.Sampling = 4, sampling
		flow.SetAddr4(&r.Key.SrcAddr, b[0:4])
		flow.SetAddr4(&r.Key.DstAddr, b[4:8])
		if in := be.Uint16(b[12:]); in != 0 {
			r.Iface = d.ifIndexName(s, uint64(in))
		}
		r.Packets, r.Bytes = uint64(be.Uint32(b[16:])), uint64(be.Uint32(b[20:]))
		r.Start = export - sinceUptime(uptime, int64(be.Uint32(b[24:])))*1e6
		r.End = export - sinceUptime(uptime, int64(be.Uint32(b[28:])))*1e6
		r.Key.Proto, r.TCPFlags = b[38], b[37]
		if r.Key.Proto == flow.ProtoICMP {
			// v5 carries ICMP type and code in the destination port.
			r.Key.ICMPType, r.Key.ICMPCode = b[34], b[35]
		} else {
			r.Key.SrcPort, r.Key.DstPort = be.Uint16(b[32:]), be.Uint16(b[34:])
		}
		s.data = true
		d.retime(r, s.seen)
		d.stats.Records++
		emit(r)
	}
	return nil
}

// sinceUptime returns how many ms before the export an event at uptime at
// happened, for an export at uptime now: modulo 2^32 ms, so a sysUptime
// that wrapped after 49.7 days still gives the right time.
func sinceUptime(now, at int64) int64 { return int64(int32(uint32(now) - uint32(at))) }
