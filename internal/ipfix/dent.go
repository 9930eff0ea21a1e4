package ipfix

import (
	"encoding/binary"

	"github.com/weir-dev/weir/internal/flow"
)

// Decoding weir's enterprise elements (enterprise.go): with
// DecoderConfig.PEN set, the elements under that PEN fill the workloads,
// the service, the rule, the conntrack mark and zone; under any other PEN
// (or with none set) they are skipped like any enterprise's.
//
// Strings are interned per session: a workload (service) is looked up by
// its three strings at once, so a run of records from the same workloads
// shares one *flow.Workload (*flow.Service) and allocates nothing. The
// table is bounded (maxEntValues values, maxEntBytes of strings, and what
// the Budget gives); when a new value does not fit it is emptied and
// starts again, counted in DecodeStats.InternFull (workloads come and go:
// a table that only filled would end up holding the departed ones).

// Bounds of a session's table of interned enterprise values.
const (
	maxEntValues = 4096
	maxEntBytes  = 1 << 20
)

// entKinds are the kinds of weir's enterprise elements, by id (0: not
// one). The nine workload and service strings are kEnt0 + their position.
var entKinds = [...]uint8{
	EntSrcWorkloadName: kEnt0, EntSrcWorkloadNamespace: kEnt0 + 1, EntSrcNodeName: kEnt0 + 2,
	EntDstWorkloadName: kEnt0 + 3, EntDstWorkloadNamespace: kEnt0 + 4, EntDstNodeName: kEnt0 + 5,
	EntServiceName: kEnt0 + 6, EntServiceBackends: kEnt0 + 7, EntServiceGroup: kEnt0 + 8,
	EntServiceMatch: kSvcMatch, EntRuleName: kRule, EntCtMark: kMark, EntCtZone: kZone,
}

// entKind is the kind of enterprise element ie under the configured PEN.
func entKind(ie uint16) uint8 {
	if int(ie) < len(entKinds) {
		return entKinds[ie]
	}
	return kSkip // an element of a later weir: skipped
}

// isEnt reports whether k is one of weir's enterprise kinds.
func isEnt(k uint8) bool { return k >= kEnt0 && k <= kZone }

// entIntern is a session's table of interned enterprise values.
type entIntern struct {
	workloads map[string]*flow.Workload
	services  map[string]*flow.Service
	rules     map[string]string
	n, bytes  int
	charged   int64 // of the session's Budget charge
}

// entValueCost is the charge of an interned value of an n-octet key: the
// key (whose substrings are the value's strings), the map entry and the
// value (a Workload or Service: three strings).
func entValueCost(n int) int64 { return stringCost(n, 0) + 64 }

// intern makes room in s's table for a value whose key has n octets,
// emptying the table when it is full (counted) or when the budget has no
// room for the value; it reports whether the value may be kept (if not,
// it is used for this record only).
func (d *Decoder) intern(s *session, n int) bool {
	t := &s.ent
	if t.n >= maxEntValues || t.bytes+n > maxEntBytes {
		d.emptyIntern(s)
	}
	cost := entValueCost(n)
	if !d.grow(s, cost) {
		if t.n == 0 {
			return false
		}
		d.emptyIntern(s) // the table's own values go first
		if !d.grow(s, cost) {
			return false
		}
	}
	t.n, t.bytes, t.charged = t.n+1, t.bytes+n, t.charged+cost
	return true
}

// emptyIntern empties s's table, counted, giving back its charge.
func (d *Decoder) emptyIntern(s *session) {
	t := &s.ent
	clear(t.workloads)
	clear(t.services)
	clear(t.rules)
	d.shrink(s, t.charged)
	t.n, t.bytes, t.charged = 0, 0, 0
	d.stats.InternFull++
}

// entKey sets d.entKey to the 2-octet-length-prefixed strings first to
// first+2 of d.entS (those have marks present) and reports whether any is
// not empty.
func (d *Decoder) entKey(first int, have uint16) bool {
	k := d.entKeyBuf[:0]
	any := false
	for i := first; i < first+3; i++ {
		var v []byte
		if have&(1<<i) != 0 {
			v = d.entS[i]
		}
		k = binary.BigEndian.AppendUint16(k, uint16(len(v)))
		k = append(k, v...)
		any = any || len(v) > 0
	}
	d.entKeyBuf = k
	return any
}

// split cuts an interned key back into its three strings (substrings of
// the key: one allocation holds them all).
func split(key string) (a, b, c string) {
	var out [3]string
	for i := range out {
		n := int(key[0])<<8 | int(key[1])
		out[i], key = key[2:2+n], key[2+n:]
	}
	return out[0], out[1], out[2]
}

// workload is the interned workload of strings first to first+2 of
// d.entS, nil when all are empty or absent.
func (d *Decoder) workload(s *session, first int, have uint16) *flow.Workload {
	if !d.entKey(first, have) {
		return nil
	}
	t := &s.ent
	if w, ok := t.workloads[string(d.entKeyBuf)]; ok {
		return w
	}
	key := string(d.entKeyBuf)
	w := &flow.Workload{}
	w.Name, w.Namespace, w.Node = split(key)
	if d.intern(s, len(key)) {
		if t.workloads == nil {
			t.workloads = map[string]*flow.Workload{}
		}
		t.workloads[key] = w
	}
	return w
}

// service is the interned service of the last three strings of d.entS,
// nil when all are empty or absent.
func (d *Decoder) service(s *session, have uint16) *flow.Service {
	if !d.entKey(6, have) {
		return nil
	}
	t := &s.ent
	if v, ok := t.services[string(d.entKeyBuf)]; ok {
		return v
	}
	key := string(d.entKeyBuf)
	v := &flow.Service{}
	v.Name, v.Backends, v.Group = split(key)
	if d.intern(s, len(key)) {
		if t.services == nil {
			t.services = map[string]*flow.Service{}
		}
		t.services[key] = v
	}
	return v
}

// rule is the interned rule name b.
func (d *Decoder) rule(s *session, b []byte) string {
	if len(b) == 0 {
		return ""
	}
	t := &s.ent
	if v, ok := t.rules[string(b)]; ok {
		return v
	}
	v := string(b)
	if d.intern(s, len(b)) {
		if t.rules == nil {
			t.rules = map[string]string{}
		}
		t.rules[v] = v
	}
	return v
}

// applyEnt sets r's workloads and service from the strings a record
// carried (have: bit i for d.entS[i]).
func (d *Decoder) applyEnt(s *session, r *flow.Record, have uint16) {
	if have&0007 != 0 {
		r.SrcWorkload = d.workload(s, 0, have)
	}
	if have&0070 != 0 {
		r.DstWorkload = d.workload(s, 3, have)
	}
	if have&0700 != 0 {
		r.Service = d.service(s, have)
	}
}
