package ipfix

// Sequence numbers. RFC 7011 numbers IPFIX data records (the number of
// those sent before the message), NetFlow v5 flows (likewise), NetFlow v9
// export packets (RFC 3954: the packet's own number). A number ahead of
// the expected one by up to maxSeqJump is a loss of that many records
// (v9: packets); one behind it by up to maxSeqJump a late or repeated
// message, which leaves the expectation where it was; any other jump a
// reset (the exporter restarted), which is not counted as a loss.

// maxSeqJump bounds the jumps counted as losses or late messages: 2^24
// records is minutes of a busy exporter, far from the 2^32 a restart at
// 0 would count.
const maxSeqJump = 1 << 24

// Loss is what a sequence gap says was lost.
type Loss struct {
	Records uint64 // data records (IPFIX, NetFlow v5)
	Packets uint64 // export packets (NetFlow v9, which numbers packets, not records)
}

// seqRules is the set of numbering rules an IPFIX exporter's messages
// are still consistent with: RFC 7011 counts every data record (options
// data included) sent before the message; softflowd 1.1.0 counts flow
// records up to and including the message, without options data.
type seqRules uint8

const (
	seqBefore     seqRules = 1 << iota // all data records before the message (RFC 7011)
	seqBeforeFlow                      // flow records before the message
	seqIncl                            // all data records up to and including it
	seqInclFlow                        // flow records up to and including it
	seqAll        = seqBefore | seqBeforeFlow | seqIncl | seqInclFlow
)

// jump accounts a message numbered seq where want was expected, carrying
// n records (packets: the numbers count v9 export packets). It reports
// whether the message went back (the caller holds it: late, or the first
// of an exporter that restarted, as the next message tells).
func (d *Decoder) jump(s *session, seq, want uint32, packets bool) (back bool) {
	d.stats.SequenceGaps++
	var l Loss
	switch ahead, behind := seq-want, want-seq; {
	case ahead <= maxSeqJump && packets:
		l.Packets = uint64(ahead)
		d.stats.LostPackets += l.Packets
	case ahead <= maxSeqJump:
		l.Records = uint64(ahead)
		d.stats.LostRecords += l.Records
	case behind <= maxSeqJump:
		back = true
	default:
		d.stats.SeqResets++
	}
	if d.cfg.OnGap != nil {
		d.cfg.OnGap(s.key.from, s.key.domain, l)
	}
	return back
}

// held settles the message held back before this one: when this one
// follows it (and not the expectation) the exporter restarted there, a
// reset; otherwise it came late, its records counted late. It reports
// whether this message follows the held one.
func (d *Decoder) held(s *session, follows, expected bool) bool {
	s.back = false
	if follows && !expected {
		d.stats.SeqResets++
		return true
	}
	d.stats.SeqReorders++
	d.stats.LateRecords += uint64(s.backN)
	return false
}

// sequence checks a NetFlow message's sequence number against the
// session's expectation and sets the next one: v5 numbers flows (next is
// seq plus its n flows), v9 packets (next is seq+1, n is not counted).
func (d *Decoder) sequence(s *session, seq, next, n uint32, packets bool) {
	if !s.seqKnown {
		s.nextSeq, s.seqKnown = next, true
		return
	}
	if s.back && d.held(s, seq == s.backSeq, seq == s.nextSeq) {
		s.nextSeq = next
		return
	}
	if seq != s.nextSeq && d.jump(s, seq, s.nextSeq, packets) {
		s.back, s.backSeq, s.backN = true, next, n
		if packets {
			s.backN = 0
		}
		return
	}
	s.nextSeq = next
}

// sequenceIPFIX checks an IPFIX message that carried n data records, of
// them flows flow records. Exporters differ in what they count (see
// seqRules); a session keeps the rules its messages agree with, so an
// exporter's own numbering is not reported as gaps while a lost message
// still is, and counts what it lost by the first rule still in force
// (until a few messages have told the rules apart, RFC 7011's). A
// message whose records could not all be counted (a set of an unknown
// template, a decoding error) resynchronises instead.
func (d *Decoder) sequenceIPFIX(s *session, seq, n, flows uint32, counted bool) {
	if s.seqRules == 0 {
		s.seqRules = seqAll
	}
	if !s.seqKnown || !counted {
		s.back = false
		s.lastSeq, s.lastN, s.lastFlows, s.seqKnown = seq, n, flows, counted
		return
	}
	match := s.seqRules & matchRules(seq, s.lastSeq, s.lastN, s.lastFlows, n, flows)
	if s.back {
		if d.held(s, s.seqRules&matchRules(seq, s.backSeq, s.backN, s.backFlows, n, flows) != 0, match != 0) {
			s.lastSeq, s.lastN, s.lastFlows = seq, n, flows
			return
		}
	}
	if match != 0 {
		s.seqRules = match
	} else {
		r := 0
		for s.seqRules&(1<<r) == 0 {
			r++
		}
		want := [4]uint32{s.lastSeq + s.lastN, s.lastSeq + s.lastFlows, s.lastSeq + n, s.lastSeq + flows}[r]
		if d.jump(s, seq, want, false) {
			s.back, s.backSeq, s.backN, s.backFlows = true, seq, n, flows
			return // held: the expectation stays until the next message tells
		}
	}
	s.lastSeq, s.lastN, s.lastFlows = seq, n, flows
}

// matchRules returns the numbering rules under which a message numbered
// seq (n records, flows flow records) follows one numbered last (lastN
// records, lastFlows flow records).
func matchRules(seq, last, lastN, lastFlows, n, flows uint32) seqRules {
	var m seqRules
	for r, w := range [4]uint32{last + lastN, last + lastFlows, last + n, last + flows} {
		if seq == w {
			m |= 1 << r
		}
	}
	return m
}
