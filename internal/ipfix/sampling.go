package ipfix

import (
	"encoding/binary"
	"time"
)

// Sampling on the wire. A record of sampled traffic (flow.Record.Sampling
// N > 1) is sent in a sampled template, which adds selectorId (302) = N,
// and each N an Encoder has seen is announced in an options record of
// SamplingOptions: scope observationDomainId, then selectorId N,
// selectorAlgorithm and samplingInterval (34) N. The selectorId is N
// itself: distinct intervals get distinct ids with no table to keep in
// step, and an id never changes meaning, so a collector that still holds
// an interval the Encoder has stopped announcing still scales right.
//
// This is the layout that nfdump (1.7.1, the Debian 12 package, and later),
// Akvorado and GoFlow2 all read (docs/record.md, "In IPFIX"): nfdump and
// Akvorado map a record's selectorId to the interval of the options record
// with the same selectorId (as a non-scope field: neither reads scope
// values), GoFlow2 takes samplingInterval as the rate of the whole
// observation domain. RFC 5476's samplingPacketInterval/Space (305/306)
// would be the PSAMP form, but nfdump 1.7.1 ignores an options template
// with selectorId and them, and GoFlow2 takes 305 (1 for 1-in-N) as the
// rate.

// maxSamplers bounds the intervals an Encoder announces at once; a new
// interval past it takes the place of the one announced longest ago.
const maxSamplers = 16

// selectorUniform is the selectorAlgorithm weir announces (IANA PSAMP
// registry): 4, uniform probabilistic sampling. weir selects by a hash of
// the packet's content (or of the flow, with --sample-flows), which
// behaves as a random 1-in-N choice; the hash-based algorithms of the
// registry (6 to 8) name hash functions weir does not use. nfdump 1.7.2
// and later need the element to keep selectors apart; no collector
// interprets its value.
const selectorUniform = 4

// optionsTemplateSet is the set id of options templates (RFC 7011 3.3.2).
const optionsTemplateSet = 3

// SamplingOptions is the options template (RFC 7011 3.4.2.2) of the
// selectors' intervals. Its first field is the scope.
var SamplingOptions = Template{ID: TemplateSampling, Fields: []Field{
	{ID: IEObservationDomainID, Length: 4},
	{ID: IESelectorID, Length: 4},
	{ID: IESelectorAlgorithm, Length: 2},
	{ID: IESamplingInterval, Length: 4},
}}

// samplingScope is the number of scope fields of SamplingOptions.
const samplingScope = 1

// samplingRecordLen is the length of an options record of SamplingOptions.
const samplingRecordLen = 4 + 4 + 2 + 4

// sampledPairs are the bits of Encoder.pairs of sampled templates' pairs
// (pair p holds templates 2p and 2p+1: sampled when p&(tSampled>>1) != 0).
const sampledPairs = 0xcccccccc

// chunk is a part of an Encoder's template announcement: whole sets that
// fit in one message, and how many options data records they hold.
type chunk struct {
	end  int // offset in Encoder.tmpl after the chunk
	opts uint32
}

// buildTemplates encodes what the Encoder announces when templates are
// due: the templates of the announced pairs (one template set, or several
// when they do not fit in a message together; with OneSet one set, and
// chunk, per template), then, once a sampled pair
// is announced, the options template and one options data set per
// announced interval (nfdump reads only the first record of an options
// data set).
func (e *Encoder) buildTemplates() {
	room := e.cfg.MTU - headerLen // a chunk fits in a message of its own
	b, cs := e.tmpl[:0], e.chunks[:0]
	set := -1
	for i := range e.ts {
		if e.pairs&(1<<(i>>1)) == 0 {
			continue
		}
		if set >= 0 && (e.cfg.OneSet || len(b)-set+templateLen(&e.ts[i]) > room) {
			binary.BigEndian.PutUint16(b[set+2:], uint16(len(b)-set))
			cs, set = append(cs, chunk{end: len(b)}), -1
		}
		if set < 0 {
			set = len(b)
			b = binary.BigEndian.AppendUint16(b, templateSet)
			b = append(b, 0, 0) // length, when the set closes
		}
		b = appendTemplate(b, &e.ts[i])
	}
	binary.BigEndian.PutUint16(b[set+2:], uint16(len(b)-set))
	cs = append(cs, chunk{end: len(b)})
	if e.pairs&sampledPairs != 0 {
		be := binary.BigEndian
		l := setHeaderLen + 6 + 4*len(SamplingOptions.Fields)
		b = be.AppendUint16(b, optionsTemplateSet)
		b = be.AppendUint16(b, uint16(l+e.pad(l)))
		b = be.AppendUint16(b, SamplingOptions.ID)
		b = be.AppendUint16(b, uint16(len(SamplingOptions.Fields)))
		b = be.AppendUint16(b, samplingScope)
		for _, f := range SamplingOptions.Fields {
			b = be.AppendUint16(b, f.ID)
			b = be.AppendUint16(b, f.Length)
		}
		b = appendZeros(b, e.pad(l))
		cs = append(cs, chunk{end: len(b)})
		l = setHeaderLen + samplingRecordLen
		for _, n := range e.samplers {
			if n == 0 {
				continue
			}
			b = be.AppendUint16(b, TemplateSampling)
			b = be.AppendUint16(b, uint16(l+e.pad(l)))
			b = be.AppendUint32(b, e.cfg.Domain)
			b = be.AppendUint32(b, n) // selectorId
			b = be.AppendUint16(b, selectorUniform)
			b = be.AppendUint32(b, n) // samplingInterval
			b = appendZeros(b, e.pad(l))
			cs = append(cs, chunk{end: len(b), opts: 1})
		}
	}
	if e.nodeSent {
		b, cs = e.appendNodeOptions(b, cs)
	}
	e.tmpl, e.chunks = b, cs
}

// appendZeros appends n zero octets (padding).
func appendZeros(b []byte, n int) []byte {
	for range n {
		b = append(b, 0)
	}
	return b
}

// templateLen is the length of t's template record.
func templateLen(t *Template) int {
	n := 4 + 4*len(t.Fields)
	for _, f := range t.Fields {
		if f.PEN != 0 {
			n += 4
		}
	}
	return n
}

// sampler reports whether interval n is announced, and makes it the one
// the next record is checked against first.
func (e *Encoder) sampler(n uint32) bool {
	for _, s := range e.samplers {
		if s == n {
			e.lastN = n
			return true
		}
	}
	return false
}

// announce adds template pair p and, when n > 1 is new, the interval n to
// what the Encoder announces, for a record that needs them: the open
// message is finished (a collector must learn a template, and a selector's
// interval, before the records that use it) and the next carries every
// announced template and interval, as every refresh does from then on.
func (e *Encoder) announce(p int, n uint32) error {
	e.pairs |= 1 << p
	if n > 1 && !e.sampler(n) {
		e.samplers[e.nextSampler] = n
		e.nextSampler = (e.nextSampler + 1) % maxSamplers
		e.lastN = n
	}
	e.buildTemplates()
	e.lastTmpl = time.Time{} // due
	return e.Flush()
}

// sampling is what a record's elements say of its sampling (decoding).
type sampling struct {
	interval     uint64 // samplingInterval or samplerRandomInterval: 1 in N
	pktInterval  uint64 // samplingPacketInterval
	pktSpace     uint64 // samplingPacketSpace
	selector     uint64 // selectorId or samplerId
	haveSpace    bool
	haveSelector bool
}

// rate is the 1-in-N interval the elements give, or 0 for none (or one
// beyond 32 bits): samplingPacketInterval i and samplingPacketSpace s
// select i packets in i+s, N = (i+s)/i rounded; samplingPacketInterval
// without a space is read as N itself (exporters that put the interval
// there, as GoFlow2 reads it); else samplingInterval.
func (m *sampling) rate() uint32 {
	n := m.interval
	switch {
	case m.pktInterval > 0 && m.haveSpace:
		if m.pktInterval >= 1<<32 || m.pktSpace >= 1<<32 {
			return 0
		}
		n = (2*(m.pktInterval+m.pktSpace) + m.pktInterval) / (2 * m.pktInterval)
	case m.pktInterval > 0:
		n = m.pktInterval
	}
	if n >= 1<<32 {
		return 0
	}
	return uint32(n)
}

// learnSampling keeps the interval of an options data record: the
// selector's, when it names one, else the session's default.
func (d *Decoder) learnSampling(s *session, m *sampling) {
	n := m.rate()
	switch {
	case n == 0:
	case !m.haveSelector:
		s.sampling = n
	case s.selectors[m.selector] != 0 || len(s.selectors) < maxSelectors:
		if s.selectors[m.selector] == 0 && !d.grow(s, selectorCost) {
			return // over the budget: counted there
		}
		if s.selectors == nil {
			s.selectors = map[uint64]uint32{}
		}
		s.selectors[m.selector] = n
		if s.lastSel == m.selector {
			s.lastSelN = n
		}
	default:
		d.stats.Errors[ErrTooManySelectors]++
	}
}

// samplingOf is a flow record's interval: its own elements', else its
// selector's (counted as unknown when no options data named it), else the
// session's default.
func (d *Decoder) samplingOf(s *session, m *sampling) uint32 {
	if n := m.rate(); n != 0 {
		return n
	}
	if !m.haveSelector {
		return s.sampling
	}
	if m.selector == s.lastSel && s.lastSelN != 0 {
		return s.lastSelN
	}
	if n, ok := s.selectors[m.selector]; ok {
		s.lastSel, s.lastSelN = m.selector, n
		return n
	}
	d.stats.Errors[ErrUnknownSelector]++
	return s.sampling
}
