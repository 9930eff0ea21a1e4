package ipfix

import (
	"encoding/binary"
	"slices"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// A template compiles to ops: one per field, saying which record field it
// fills, so decoding a record is one pass with no lookups.
type op struct {
	kind   uint8
	length uint16 // octets, or Variable
}

// Field kinds a template's fields compile to.
const (
	kSkip uint8 = iota
	kBytes
	kPackets
	kBytesTotal
	kPacketsTotal
	kRevBytes
	kRevPackets
	kRevBytesTotal
	kRevPacketsTotal
	kSrc4
	kDst4
	kSrc6
	kDst6
	kSrcPort
	kDstPort
	kProto
	kFlags
	kRevFlags
	kICMPTypeCode
	kICMPType
	kICMPCode
	kVLAN
	kEndReason
	kIfName
	kIfIndex
	kStartSec
	kEndSec
	kStartMs
	kEndMs
	kStartNTPus // dateTimeMicroseconds: NTP format
	kEndNTPus
	kStartNTPns
	kEndNTPns
	kStartUptime // ms since the exporter's boot
	kEndUptime
	kSysInitMs // systemInitTimeMilliseconds
	kStartDeltaUs
	kEndDeltaUs
	kSampling    // samplingInterval, samplerRandomInterval: 1 in N
	kPktInterval // samplingPacketInterval (RFC 5476): packets selected in a row
	kPktSpace    // samplingPacketSpace: packets skipped after them
	kSelector    // selectorId, samplerId (NetFlow v9 FLOW_SAMPLER_ID)
	kDropBytes
	kDropPackets
	kFwdStatus // forwardingStatus (RFC 7270 4.12)
	kPostSrc4  // postNATSourceIPv4Address (nat.go)
	kPostDst4
	kPostSrc6
	kPostDst6
	kPostSrcPort // postNAPTSourceTransportPort
	kPostDstPort
	kFwEvent // firewallEvent, NetFlow v9 NF_F_FW_EVENT
	// weir's enterprise elements (dent.go), kEnt0 to kZone: the nine
	// workload and service strings (kEnt0 + their index in
	// Decoder.entS), then the others.
	kEnt0
	_
	_
	_
	_
	_
	_
	_
	_
	kSvcMatch
	kRule
	kMark
	kZone
	kNodeName // observationDomainName (node.go)
)

// ieKind maps IANA information element ids (also NetFlow v9 field types,
// which share the numbers below 128 and these above) to kinds.
var ieKind = map[uint16]uint8{
	1: kBytes, 2: kPackets, 85: kBytesTotal, 86: kPacketsTotal,
	8: kSrc4, 12: kDst4, 27: kSrc6, 28: kDst6, 7: kSrcPort, 11: kDstPort, 4: kProto, 6: kFlags,
	32: kICMPTypeCode, 139: kICMPTypeCode, 176: kICMPType, 177: kICMPCode, 178: kICMPType, 179: kICMPCode,
	58: kVLAN, 243: kVLAN, 136: kEndReason, 82: kIfName, 10: kIfIndex,
	150: kStartSec, 151: kEndSec, 152: kStartMs, 153: kEndMs, 154: kStartNTPus, 155: kEndNTPus,
	156: kStartNTPns, 157: kEndNTPns, 22: kStartUptime, 21: kEndUptime, 160: kSysInitMs,
	158: kStartDeltaUs, 159: kEndDeltaUs, 34: kSampling, 50: kSampling, 305: kPktInterval, 306: kPktSpace,
	302: kSelector, 48: kSelector,
	132: kDropBytes, 133: kDropPackets, 89: kFwdStatus,
	225: kPostSrc4, 226: kPostDst4, 281: kPostSrc6, 282: kPostDst6, 227: kPostSrcPort, 228: kPostDstPort,
	233: kFwEvent, ieCiscoFwEvent: kFwEvent, // 40005 only in NetFlow v9: IPFIX ids stop at 32767
	IEObservationDomainName: kNodeName,
}

// ieKinds is ieKind as an array: a template of 512 fields is compiled
// with 512 loads rather than 512 map lookups (template floods stay cheap).
var ieKinds = func() (a [1 << 16]uint8) {
	for ie, k := range ieKind {
		a[ie] = k
	}
	return a
}()

// revKind maps kinds to their RFC 5103 reverse (PEN 29305) kinds.
var revKind = map[uint8]uint8{kBytes: kRevBytes, kPackets: kRevPackets, kBytesTotal: kRevBytesTotal,
	kPacketsTotal: kRevPacketsTotal, kFlags: kRevFlags}

type template struct {
	ops     []op
	minLen  int // shortest record (variable fields as 1 octet)
	options bool
	seen    time.Time
	cost    int64 // charged to the Budget (templateCost)
}

// templateSet learns the template records of one set (options: an options
// template set; v9: NetFlow v9 layout, whose options templates give scope
// and option lengths in bytes).
func (d *Decoder) templateSet(s *session, b []byte, options, v9 bool, now time.Time) error {
	be := binary.BigEndian
	for len(b) >= 4 {
		id, count := be.Uint16(b), int(be.Uint16(b[2:]))
		b = b[4:]
		if count == 0 && !v9 { // withdrawal (RFC 7011 8.1)
			if (id == 2 && !options) || (id == 3 && options) {
				for tid, t := range s.templates {
					if t.options == options {
						d.forgetTemplate(s, tid, t)
						d.stats.Withdrawals++
					}
				}
			} else if t, ok := s.templates[id]; ok {
				d.forgetTemplate(s, id, t)
				d.stats.Withdrawals++
			}
			continue
		}
		nfields := count
		if options {
			if len(b) < 2 {
				return d.fail(ErrBadTemplate, "options template %d cut short", id)
			}
			if v9 { // the count was the scope length; then the option length, both in bytes
				ol := int(be.Uint16(b))
				nfields, b = (count+ol)/4, b[2:]
			} else {
				sc := int(be.Uint16(b))
				b = b[2:]
				if sc == 0 || sc > count {
					return d.fail(ErrBadTemplate, "options template %d: scope count %d of %d fields", id, sc, count)
				}
			}
		}
		if id < 256 || nfields == 0 || nfields > MaxFields {
			return d.fail(ErrBadTemplate, "template %d with %d fields", id, nfields)
		}
		// Ops are compiled into a reused buffer, the template on the
		// stack: a refresh of a template already held (every UDP exporter
		// sends them) allocates nothing.
		if cap(d.ops) < MaxFields {
			d.ops = make([]op, 0, MaxFields)
		}
		t := template{ops: d.ops[:nfields], options: options, seen: now}
		for i := range t.ops {
			if len(b) < 4 {
				return d.fail(ErrBadTemplate, "template %d: field %d cut short", id, i)
			}
			ie, l := be.Uint16(b), be.Uint16(b[2:])
			b = b[4:]
			var k uint8
			if ie&0x8000 == 0 || v9 {
				k = ieKinds[ie]
			} else {
				if len(b) < 4 {
					return d.fail(ErrBadTemplate, "template %d: enterprise number cut short", id)
				}
				ie, k = ie&0x7fff, kSkip
				switch pen := be.Uint32(b); pen {
				case 0:
					k = ieKinds[ie]
				case ReversePEN:
					k = revKind[ieKinds[ie]]
				case d.cfg.PEN: // not 0: that is the case above
					k = entKind(ie)
				}
				b = b[4:]
			}
			if l == 0 || (l == Variable && v9) {
				return d.fail(ErrBadTemplate, "template %d: field %d of length %d", id, ie, l)
			}
			if r := fitRange[k]; l < r[0] || l > r[1] {
				if isEnt(k) { // weir's own element at a length it never has: say so
					d.stats.Errors[ErrBadEnterpriseField]++
				}
				k = kSkip // a length weir cannot read this element at: skip it, whole
			}
			t.ops[i] = op{kind: k, length: l}
			if l == Variable {
				t.minLen++
			} else {
				t.minLen += int(l)
			}
		}
		d.ops = t.ops
		old, ok := s.templates[id]
		if ok && old.options == options && slices.Equal(old.ops, t.ops) {
			old.seen = now
			d.stats.Templates++
			continue
		}
		if ok { // a new layout under the same id: the old one goes first
			d.forgetTemplate(s, id, old)
		}
		if len(s.templates) >= d.cfg.MaxTemplates {
			return d.fail(ErrTooManyTemplates, "%d templates", len(s.templates))
		}
		t.cost = templateCost(len(t.ops))
		if err := d.reserve(s, 0, 1, t.cost); err != nil {
			return err
		}
		s.cost += t.cost
		t.ops = slices.Clone(t.ops)
		d.live++
		nt := t // on the heap only when new
		s.templates[id] = &nt
		d.stats.Templates++
	}
	return nil // fewer than 4 bytes left: padding
}

// fitRange is fits as a table: the shortest and longest length each kind
// can be read at (every kind's lengths are a range).
var fitRange = func() (r [256][2]uint16) {
	for k := range r {
		r[k] = [2]uint16{1, 0} // none
		for l := uint16(16); l >= 1; l-- {
			if fits(uint8(k), l) {
				r[k][0] = l
				if r[k][1] == 0 {
					r[k][1] = l
				}
			}
		}
		if fits(uint8(k), Variable) {
			r[k][1] = Variable
		}
	}
	return r
}()

// fits reports whether a field of length l can be read as kind k:
// addresses at their size, integers reduced-size (RFC 7011 6.2) up to 8.
func fits(k uint8, l uint16) bool {
	switch k {
	case kSrc4, kDst4, kPostSrc4, kPostDst4:
		return l == 4
	case kSrc6, kDst6, kPostSrc6, kPostDst6:
		return l == 16
	case kIfName, kSkip, kRule, kNodeName, kEnt0, kEnt0 + 1, kEnt0 + 2, kEnt0 + 3, kEnt0 + 4, kEnt0 + 5, kEnt0 + 6, kEnt0 + 7, kEnt0 + 8:
		return true
	case kSvcMatch:
		return l == 1
	case kMark:
		return l >= 1 && l <= 4
	case kZone:
		return l >= 1 && l <= 2
	case kStartNTPus, kEndNTPus, kStartNTPns, kEndNTPns:
		return l == 8
	}
	return l >= 1 && l <= 8
}

// msgHeader is what records' times may be relative to.
type msgHeader struct {
	export  int64 // export time, Unix seconds
	uptime  int64 // NetFlow v9/v5: the exporter's uptime at export, ms
	version uint16
}

// dataSet decodes the records of one data set, received at now.
func (d *Decoder) dataSet(s *session, id uint16, b []byte, h *msgHeader, now time.Time, emit func(*flow.Record)) error {
	t := s.templates[id]
	if t == nil {
		d.stats.SkippedSets++
		d.stats.Errors[ErrUnknownTemplate]++
		return nil // the rest of the message may still decode
	}
	for len(b) >= t.minLen && len(b) > 0 {
		n, err := d.record(s, t, b, h)
		if err != nil {
			return err
		}
		b = b[n:]
		if t.options {
			d.stats.OptionsRecords++
			continue
		}
		s.data = true
		d.retime(&d.rec, now)
		d.stats.Records++
		emit(&d.rec)
	}
	return nil // what is left is padding
}

// ntp converts an NTP timestamp (seconds since 1900, fraction) to Unix ns.
func ntp(v uint64) int64 {
	const epoch = 2208988800 // 1900 to 1970
	sec, frac := int64(v>>32)-epoch, v&0xffffffff
	return sec*1e9 + int64((frac*1e9)>>32)
}

// record decodes one record into d.rec and returns its length.
func (d *Decoder) record(s *session, t *template, b []byte, h *msgHeader) (int, error) {
	r := &d.rec
	*r = flow.Record{}
	var sysInit, upStart, upEnd, dStart, dEnd int64
	var haveUp, haveDelta bool
	var have [4]bool // delta bytes, packets, reverse bytes, reverse packets
	var ifIndex uint64
	var tot, revTot [2]uint64
	var smp sampling
	var post postNAT
	var ent uint16 // enterprise strings found: bit i for d.entS[i]
	var haveNode bool
	p := 0
	for _, o := range t.ops {
		l := int(o.length)
		if o.length == Variable {
			if p >= len(b) {
				return 0, d.fail(ErrBadFieldLength, "variable-length field past the set")
			}
			l, p = int(b[p]), p+1
			if l == 255 {
				if p+2 > len(b) {
					return 0, d.fail(ErrBadFieldLength, "3-octet length past the set")
				}
				l, p = int(binary.BigEndian.Uint16(b[p:])), p+2
			}
		}
		if p+l > len(b) {
			return 0, d.fail(ErrBadFieldLength, "field of %d octets past the set", l)
		}
		f := b[p : p+l]
		p += l
		if o.kind == kSkip {
			continue
		}
		var v uint64
		switch l { // the common widths as single loads; others reduced-size (RFC 7011 6.2)
		case 1:
			v = uint64(f[0])
		case 2:
			v = uint64(binary.BigEndian.Uint16(f))
		case 4:
			v = uint64(binary.BigEndian.Uint32(f))
		case 8:
			v = binary.BigEndian.Uint64(f)
		default:
			if l < 8 {
				for _, c := range f {
					v = v<<8 | uint64(c)
				}
			}
		}
		switch o.kind {
		case kBytes:
			r.Bytes, have[0] = v, true
		case kPackets:
			r.Packets, have[1] = v, true
		case kBytesTotal:
			tot[0] = v
		case kPacketsTotal:
			tot[1] = v
		case kRevBytes:
			r.RevBytes, have[2] = v, true
		case kRevPackets:
			r.RevPackets, have[3] = v, true
		case kRevBytesTotal:
			revTot[0] = v
		case kRevPacketsTotal:
			revTot[1] = v
		case kSrc4:
			flow.SetAddr4(&r.Key.SrcAddr, f)
			r.Key.IPVersion = 4
		case kDst4:
			flow.SetAddr4(&r.Key.DstAddr, f)
		case kSrc6:
			copy(r.Key.SrcAddr[:], f)
			r.Key.IPVersion = 6
		case kDst6:
			copy(r.Key.DstAddr[:], f)
		case kSrcPort:
			r.Key.SrcPort = uint16(v)
		case kDstPort:
			r.Key.DstPort = uint16(v)
		case kProto:
			r.Key.Proto = uint8(v)
		case kFlags:
			r.TCPFlags = uint8(v)
		case kRevFlags:
			r.RevTCPFlags = uint8(v)
		case kICMPTypeCode:
			r.Key.ICMPType, r.Key.ICMPCode = uint8(v>>8), uint8(v)
		case kICMPType:
			r.Key.ICMPType = uint8(v)
		case kICMPCode:
			r.Key.ICMPCode = uint8(v)
		case kVLAN:
			r.VLAN = uint16(v) & 0xfff
		case kEndReason:
			r.EndReason = endReasonOf(v)
		case kIfName:
			r.Iface = d.name(s, f)
		case kIfIndex:
			ifIndex = v
		case kStartSec:
			r.Start = int64(v) * 1e9
		case kEndSec:
			r.End = int64(v) * 1e9
		case kStartMs:
			r.Start = int64(v) * 1e6
		case kEndMs:
			r.End = int64(v) * 1e6
		case kStartNTPus, kStartNTPns:
			r.Start = ntp(v)
		case kEndNTPus, kEndNTPns:
			r.End = ntp(v)
		case kStartUptime:
			upStart, haveUp = int64(v), true
		case kEndUptime:
			upEnd, haveUp = int64(v), true
		case kSysInitMs:
			sysInit = int64(v)
			if t.options { // RFC 7011 exporters report it once, in options data
				s.sysInit = sysInit
			}
		case kStartDeltaUs:
			dStart, haveDelta = int64(v), true
		case kEndDeltaUs:
			dEnd, haveDelta = int64(v), true
		case kSampling:
			smp.interval = v
		case kPktInterval:
			smp.pktInterval = v
		case kPktSpace:
			smp.pktSpace, smp.haveSpace = v, true
		case kSelector:
			smp.selector, smp.haveSelector = v, true
		case kDropBytes:
			r.DropBytes = v
		case kDropPackets:
			r.DropPackets = v
		case kFwdStatus:
			if v > 0xff { // a wider field (the type was unsigned32) with the status octet first
				v = uint64(f[0])
			}
			if v>>6 == 2 { // Dropped: the wire names the reason only by its RFC 7270 code
				r.DropReason = dropCodeNames[v&0x3f]
			}
		case kPostSrc4, kPostSrc6:
			post.set(&post.src, f, postSrcAddr)
		case kPostDst4, kPostDst6:
			post.set(&post.dst, f, postDstAddr)
		case kPostSrcPort:
			post.srcPort, post.have = uint16(v), post.have|postSrcPort
		case kPostDstPort:
			post.dstPort, post.have = uint16(v), post.have|postDstPort
		case kFwEvent:
			if v == firewallDenied {
				r.Verdict = flow.VerdictDeny
			}
		case kEnt0, kEnt0 + 1, kEnt0 + 2, kEnt0 + 3, kEnt0 + 4, kEnt0 + 5, kEnt0 + 6, kEnt0 + 7, kEnt0 + 8:
			i := o.kind - kEnt0
			d.entS[i], ent = f, ent|1<<i
		case kSvcMatch:
			if v < 5 {
				r.ServiceMatch = flow.ServiceMatch(v)
			} else {
				d.stats.Errors[ErrBadEnterpriseField]++ // a match weir does not know: none
			}
		case kRule:
			r.Rule = d.rule(s, f)
		case kMark:
			r.Mark = uint32(v)
		case kZone:
			r.Zone = uint16(v)
		case kNodeName: // an empty one names none in a data record, clears the domain's name in options data
			r.Node, haveNode = d.nodeName(s, f), len(f) > 0 || t.options
		}
	}
	if ent != 0 && !t.options {
		d.applyEnt(s, r, ent)
	}
	// Totals stand in for deltas the template lacks.
	for i, p := range [4]*uint64{&r.Bytes, &r.Packets, &r.RevBytes, &r.RevPackets} {
		if !have[i] {
			*p = [4]uint64{tot[0], tot[1], revTot[0], revTot[1]}[i]
		}
	}
	if r.Key.IPVersion == 0 && !t.options {
		r.Key.IPVersion = 4 // no address fields: an IPv4-less record still counts
	}
	if r.Key.Proto != flow.ProtoICMP && r.Key.Proto != flow.ProtoICMPv6 {
		r.Key.ICMPType, r.Key.ICMPCode = 0, 0
	} else {
		r.Key.SrcPort, r.Key.DstPort = 0, 0
	}
	if post.have != 0 && !t.options {
		post.apply(r)
	}
	if r.Iface == "" && ifIndex != 0 {
		r.Iface = d.ifIndexName(s, ifIndex)
	}
	if t.options {
		d.learnSampling(s, &smp)
		if haveNode { // the observation domain's name: the node of its records that name none
			s.node = r.Node
		}
	} else {
		r.Sampling = d.samplingOf(s, &smp)
		if !haveNode {
			r.Node = s.node
		}
	}
	if sysInit == 0 {
		sysInit = s.sysInit
	}
	switch {
	case haveUp && sysInit != 0:
		r.Start, r.End = (sysInit+upStart)*1e6, (sysInit+upEnd)*1e6
	case haveUp && h.uptime != 0: // NetFlow: relative to the header's uptime at export
		r.Start = (h.export*1000 - sinceUptime(h.uptime, upStart)) * 1e6
		r.End = (h.export*1000 - sinceUptime(h.uptime, upEnd)) * 1e6
	case haveDelta:
		r.Start, r.End = h.export*1e9-dStart*1e3, h.export*1e9-dEnd*1e3
	}
	return p, nil
}

// endReasonOf maps IPFIX flowEndReason to weir's.
func endReasonOf(v uint64) flow.EndReason {
	switch v {
	case 1:
		return flow.ReasonIdle
	case 2:
		return flow.ReasonActive
	case 3:
		return flow.ReasonEnd
	case 4:
		return flow.ReasonShutdown
	case 5:
		return flow.ReasonFull
	}
	return flow.ReasonNone
}

func appendUint(b []byte, v uint64) []byte {
	var d [20]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(b, d[i:]...)
}
