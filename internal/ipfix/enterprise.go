package ipfix

import (
	"encoding/binary"
	"unicode/utf8"

	"github.com/weir-dev/weir/internal/flow"
)

// Enrichment on the wire. The workloads, the service, the rule name and
// the conntrack mark and zone have no IANA element; weir sends them as
// enterprise elements (RFC 7011 3.2: the enterprise bit set, the 4-octet
// Private Enterprise Number after the field's length) under the PEN of
// Config.PEN, and the Decoder reads them back under DecoderConfig.PEN.
// weir has no PEN registered with IANA, so the PEN is the operator's
// (their organisation's); with 0, the default, nothing here is sent and
// enterprise elements are skipped like any other enterprise's. RFC 5612's
// 32473 is for documentation and examples only.
//
// Design: the enterprise block is one more shape dimension of the
// templates, the index bit tEnt (template.go), so it combines with drops,
// sampling, NAT and deny like they combine with each other: templates
// 289–320 are 256–263 and 265–288 with the block (templateID). One block
// with every element, not one per group of them: a record that has any
// of them pays 17 octets for those it lacks (a length octet per empty
// string, the three integers), which is less than the template churn of
// eight more dimensions would cost. The integers go just before
// interfaceName with the other fixed-length fields; the strings, variable
// length, after it. Each pair is announced with the first record that
// needs it, so records without enrichment are sent exactly as before the
// block existed, and an Encoder with no PEN never uses it.
//
// Strings are cut, at a UTF-8 rune start, so that the record fits in a
// message of the Encoder's MTU with the longest interface name: longest
// strings first, to the longest length all can keep (Encoder.Cut counts
// the strings cut).

// Enterprise information elements under the configured PEN: strings are
// variable-length UTF-8 (RFC 7011 7), the others unsigned integers.
const (
	EntSrcWorkloadName      = 1  // string: flow.Record.SrcWorkload.Name
	EntSrcWorkloadNamespace = 2  // string: SrcWorkload.Namespace
	EntSrcNodeName          = 3  // string: SrcWorkload.Node
	EntDstWorkloadName      = 4  // string: DstWorkload.Name
	EntDstWorkloadNamespace = 5  // string: DstWorkload.Namespace
	EntDstNodeName          = 6  // string: DstWorkload.Node
	EntServiceName          = 7  // string: Service.Name
	EntServiceBackends      = 8  // string: Service.Backends
	EntServiceGroup         = 9  // string: Service.Group
	EntServiceMatch         = 10 // unsigned8: flow.ServiceMatch (0 none, 1 vip, 2 nat, 3 backend, 4 ambiguous)
	EntRuleName             = 11 // string: Rule
	EntCtMark               = 12 // unsigned32: Mark
	EntCtZone               = 13 // unsigned16: Zone
)

// DocumentationPEN is RFC 5612's Private Enterprise Number for
// documentation and examples: for tests and examples, never for
// production export.
const DocumentationPEN = 32473

// entStrings is the number of string elements; their ids in template
// order are entStringIDs.
const entStrings = 10

var entStringIDs = [entStrings]uint16{EntSrcWorkloadName, EntSrcWorkloadNamespace, EntSrcNodeName,
	EntDstWorkloadName, EntDstWorkloadNamespace, EntDstNodeName, EntServiceName, EntServiceBackends,
	EntServiceGroup, EntRuleName}

// entFixedFields are the block's integers, before interfaceName.
func entFixedFields(pen uint32) []Field {
	return []Field{
		{ID: EntServiceMatch, Length: 1, PEN: pen},
		{ID: EntCtMark, Length: 4, PEN: pen},
		{ID: EntCtZone, Length: 2, PEN: pen},
	}
}

// entStringFields are the block's strings, after interfaceName.
func entStringFields(pen uint32) []Field {
	fs := make([]Field, entStrings)
	for i, id := range entStringIDs {
		fs[i] = Field{ID: id, Length: Variable, PEN: pen}
	}
	return fs
}

// enterpriseTemplates are the templates with the enterprise block under
// pen: Templates[i] with it is index i|tEnt, id templateID(i|tEnt).
func enterpriseTemplates(pen uint32) []Template {
	ts := make([]Template, len(Templates))
	for i := range ts {
		ts[i] = Template{ID: templateID(i | tEnt), Fields: biflowFields(i|tEnt, pen)}
	}
	return ts
}

// enriched reports whether r has anything the enterprise block carries.
func enriched(r *flow.Record) bool {
	return r.SrcWorkload != nil || r.DstWorkload != nil || r.Service != nil || r.ServiceMatch != flow.ServiceMatchNone ||
		r.Rule != "" || r.Mark != 0 || r.Zone != 0
}

// loadStrings puts r's enterprise strings, in template order, in s.
func loadStrings(s *[entStrings]string, r *flow.Record) {
	*s = [entStrings]string{}
	if w := r.SrcWorkload; w != nil {
		s[0], s[1], s[2] = w.Name, w.Namespace, w.Node
	}
	if w := r.DstWorkload; w != nil {
		s[3], s[4], s[5] = w.Name, w.Namespace, w.Node
	}
	if v := r.Service; v != nil {
		s[6], s[7], s[8] = v.Name, v.Backends, v.Group
	}
	s[9] = r.Rule
}

// varLen is what a variable-length field of n octets costs (RFC 7011 7).
func varLen(n int) int {
	if n < 255 {
		return 1 + n
	}
	return 3 + n
}

// fitStrings cuts the strings of s so that they cost at most budget
// octets, and returns what they cost and how many it cut. The cut is the
// longest length c that lets the strings fit when every longer one is
// cut to c (then to a rune start). budget is at least entStrings: every
// string can be empty (TestEnterpriseBudget).
func fitStrings(s *[entStrings]string, budget int) (cost, cut int) {
	longest := 0
	for _, v := range s {
		cost += varLen(len(v))
		longest = max(longest, len(v))
	}
	if cost <= budget {
		return cost, 0
	}
	costAt := func(c int) (n int) {
		for _, v := range s {
			n += varLen(min(len(v), c))
		}
		return n
	}
	lo, hi := 0, longest // costAt(lo) fits, costAt(hi) does not
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; costAt(mid) <= budget {
			lo = mid
		} else {
			hi = mid
		}
	}
	cost = 0
	for i, v := range s {
		if len(v) > lo {
			s[i], cut = cutRune(v, lo), cut+1
		}
		cost += varLen(len(s[i]))
	}
	return cost, cut
}

// cutRune cuts v to at most n octets at a UTF-8 rune start (at most 3
// octets less; where v is not UTF-8 there, at n).
func cutRune(v string, n int) string {
	for k := n; k >= 0 && k > n-utf8.UTFMax; k-- {
		if k == 0 || utf8.RuneStart(v[k]) {
			return v[:k]
		}
	}
	return v[:n]
}

// appendEntFixed writes the block's integers.
func appendEntFixed(b []byte, r *flow.Record) []byte {
	b = append(b, uint8(r.ServiceMatch))
	b = binary.BigEndian.AppendUint32(b, r.Mark)
	return binary.BigEndian.AppendUint16(b, r.Zone)
}

// appendEntStrings writes the block's strings (fitted by fitStrings).
func appendEntStrings(b []byte, s *[entStrings]string) []byte {
	for _, v := range s {
		if len(v) < 255 {
			b = append(b, byte(len(v)))
		} else {
			b = append(b, 255)
			b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
		}
		b = append(b, v...)
	}
	return b
}
