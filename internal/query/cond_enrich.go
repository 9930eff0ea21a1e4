package query

import (
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/store"
)

// The enrichment attributes: the workloads at the two ends (name,
// namespace, node), the service a flow reached (name, backends, group)
// and how it was matched. The strings compare by equality, "" for a
// record whose workload or service is not known; service_match by its
// name ("" or none, vip, nat, backend, ambiguous).

// numEnrichStrs is the number of enrichment string attributes: the
// label's enr array, and AttrSrcWorkload … AttrServiceGroup in order.
const numEnrichStrs = 9

// isEnrichStr reports whether a is an enrichment string attribute.
func (a attr) isEnrichStr() bool { return a >= aSrcWorkload && a <= aServiceGroup }

// isEnrichStr reports whether a is an enrichment string attribute.
func (a Attr) isEnrichStr() bool { return a >= AttrSrcWorkload && a <= AttrServiceGroup }

// enrichCol is the store column holding enrichment string attribute k
// (0 … numEnrichStrs-1: src name, namespace, node, dst …, service name,
// backends, group).
func enrichCol(k int) store.Column {
	switch k / 3 {
	case 0:
		return store.ColSrcWorkload
	case 1:
		return store.ColDstWorkload
	}
	return store.ColService
}

// enrichValue is row i's enrichment string k, "" when not known.
func enrichValue(c *store.Columns, k, i int) string {
	switch k / 3 {
	case 0:
		return wlField(c.SrcWorkload[i], k%3)
	case 1:
		return wlField(c.DstWorkload[i], k%3)
	}
	s := c.Service[i]
	if s == nil {
		return ""
	}
	switch k {
	case 6:
		return s.Name
	case 7:
		return s.Backends
	}
	return s.Group
}

func wlField(w *flow.Workload, f int) string {
	if w == nil {
		return ""
	}
	switch f {
	case 0:
		return w.Name
	case 1:
		return w.Namespace
	}
	return w.Node
}

// evalEnrich evaluates an enrichment string leaf. Rows of a block share
// their workload's pointer, so a row with the previous row's pointer
// takes its result without comparing strings again.
func (l *leaf) evalEnrich(c *store.Columns, sel []bool) {
	k, want := int(l.attr-aSrcWorkload), l.op == opEq
	var last any
	lastRes := false
	for i := range sel {
		var p any
		switch k / 3 {
		case 0:
			p = c.SrcWorkload[i]
		case 1:
			p = c.DstWorkload[i]
		default:
			p = c.Service[i]
		}
		if i > 0 && p == last {
			sel[i] = lastRes
			continue
		}
		last = p
		lastRes = (enrichValue(c, k, i) == l.str) == want
		sel[i] = lastRes
	}
}
