package store

import (
	"github.com/weir-dev/weir/internal/flow"
)

// The enrichment columns (version 5): the names, namespaces and nodes of
// the two ends' workloads and the service's name, backends and group are
// sdictl string columns, ServiceMatch an integer one. A reader rebuilds
// the records' pointers from the three columns of a workload (or
// service) together: one *flow.Workload per distinct workload in a
// block, shared by its rows and by both ends.

// isLongStr reports whether column id is an enrichment string column
// or the node (stored as sdictl).
func isLongStr(id int) bool { return id >= cSrcWlName && id <= cSvcGroup || id == cNode }

// groupOf returns the first column id of the group id belongs to, or -1.
func groupOf(id int) int {
	if id < cSrcWlName || id > cSvcGroup {
		return -1
	}
	return cSrcWlName + (id-cSrcWlName)/3*3
}

// enrichStr is record r's string of enrichment column id, "" when the
// workload or service is not known.
func enrichStr(r *flow.Record, id int) string {
	switch id {
	case cSrcWlName, cSrcWlNamespace, cSrcWlNode:
		return wlStr(r.SrcWorkload, id-cSrcWlName)
	case cDstWlName, cDstWlNamespace, cDstWlNode:
		return wlStr(r.DstWorkload, id-cDstWlName)
	}
	s := r.Service
	if s == nil {
		return ""
	}
	switch id {
	case cSvcName:
		return s.Name
	case cSvcBackends:
		return s.Backends
	case cSvcGroup:
		return s.Group
	}
	return ""
}

func wlStr(w *flow.Workload, k int) string {
	if w == nil {
		return ""
	}
	switch k {
	case 0:
		return w.Name
	case 1:
		return w.Namespace
	}
	return w.Node
}

// putEnrich encodes the enrichment columns, or leaves them all out
// without a pass over the rows when extract found no enriched record;
// an empty one is left out too. It returns how many strings were cut to
// maxLongStr.
func (e *blockEncoder) putEnrich(recs []flow.Record) (cut int) {
	for id := cSrcWlName; id <= cServiceMatch; id++ {
		e.nonZero[id] = 0
	}
	if e.enr {
		z := &e.nonZero
		for i := range recs {
			r := &recs[i]
			if w := r.SrcWorkload; w != nil {
				z[cSrcWlName] |= uint64(len(w.Name))
				z[cSrcWlNamespace] |= uint64(len(w.Namespace))
				z[cSrcWlNode] |= uint64(len(w.Node))
			}
			if w := r.DstWorkload; w != nil {
				z[cDstWlName] |= uint64(len(w.Name))
				z[cDstWlNamespace] |= uint64(len(w.Namespace))
				z[cDstWlNode] |= uint64(len(w.Node))
			}
			if s := r.Service; s != nil {
				z[cSvcName] |= uint64(len(s.Name))
				z[cSvcBackends] |= uint64(len(s.Backends))
				z[cSvcGroup] |= uint64(len(s.Group))
			}
			z[cServiceMatch] |= uint64(r.ServiceMatch)
		}
	}
	for id := cSrcWlName; id <= cSvcGroup; id++ {
		cut += e.putStrs(id, recs)
	}
	e.putSparse(cServiceMatch, recs, false)
	return cut
}

// groupDecoder is a decoder's scratch for rebuilding pointer columns.
type groupDecoder struct {
	dict [3][]string
	idx  [3][]uint32
	seen map[[3]uint32]int32 // combination → index in the pointers built for this column
	wl   map[flow.Workload]*flow.Workload
	svc  map[flow.Service]*flow.Service
	mkW  func(a, b, c string) *flow.Workload
	mkS  func(a, b, c string) *flow.Service
}

// newBlock forgets the pointers built for the previous block, so that
// one block's rows never share with another's (a reader may keep them).
func (g *groupDecoder) newBlock() {
	if g.wl == nil {
		g.wl, g.svc = make(map[flow.Workload]*flow.Workload), make(map[flow.Service]*flow.Service)
		g.mkW = func(a, b, c string) *flow.Workload {
			k := flow.Workload{Name: a, Namespace: b, Node: c}
			p := g.wl[k]
			if p == nil {
				p = &k
				g.wl[k] = p
			}
			return p
		}
		g.mkS = func(a, b, c string) *flow.Service {
			k := flow.Service{Name: a, Backends: b, Group: c}
			p := g.svc[k]
			if p == nil {
				p = &k
				g.svc[k] = p
			}
			return p
		}
	}
	clear(g.wl)
	clear(g.svc)
}

// decodeGroup decodes the three string columns from first (a workload's
// or the service's) and fills the pointer column: nil for rows whose
// three strings are all "", otherwise one shared pointer per distinct
// combination in the block.
func (d *decoder) decodeGroup(h *blockHeader, blk []byte, base, first int, dst *Columns, verify bool) error {
	g, n := &d.grp, h.rows
	one := true // every column has one entry
	var idx [3][]uint32
	var dict [3][]string
	for k := range 3 {
		id := first + k
		if id >= h.ncols || h.omit&(1<<uint(id)) != 0 {
			g.dict[k] = append(g.dict[k][:0], "")
			dict[k] = g.dict[k]
			continue
		}
		c := &h.cols[id]
		st, err := d.stream(c, blk, base, verify)
		if err != nil {
			return err
		}
		if dict[k], idx[k], err = d.str.decodeDict(c.enc, st, n, &g.dict[k], &g.idx[k]); err != nil {
			return err
		}
		one = one && idx[k] == nil
	}
	switch first {
	case cSrcWlName:
		dst.SrcWorkload = buildGroup(g, n, one, &idx, &dict, g.mkW, dst.SrcWorkload)
	case cDstWlName:
		dst.DstWorkload = buildGroup(g, n, one, &idx, &dict, g.mkW, dst.DstWorkload)
	case cSvcName:
		dst.Service = buildGroup(g, n, one, &idx, &dict, g.mkS, dst.Service)
	}
	return nil
}

// buildGroup fills dst (resized to n) with the rows' pointers: rows
// whose three strings are "" get nil, the others the pointer mk built
// for their combination of dictionary indexes, once per block.
func buildGroup[T any](g *groupDecoder, n int, one bool, idx *[3][]uint32, dict *[3][]string, mk func(a, b, c string) *T, dst []*T) []*T {
	dst = zeros(dst, n)
	if n == 0 {
		return dst
	}
	if one { // the common case: one value (or none) for every row
		if dict[0][0] != "" || dict[1][0] != "" || dict[2][0] != "" {
			p := mk(dict[0][0], dict[1][0], dict[2][0])
			for i := range dst {
				dst[i] = p
			}
		}
		return dst
	}
	if g.seen == nil {
		g.seen = make(map[[3]uint32]int32)
	}
	clear(g.seen)
	var built []*T
	for i := range dst {
		var key [3]uint32
		for k := range 3 {
			if idx[k] != nil {
				key[k] = idx[k][i]
			}
		}
		j, ok := g.seen[key]
		if !ok {
			a, b, c := dict[0][key[0]], dict[1][key[1]], dict[2][key[2]]
			var p *T
			if a != "" || b != "" || c != "" {
				p = mk(a, b, c)
			}
			j = int32(len(built))
			built = append(built, p)
			g.seen[key] = j
		}
		dst[i] = built[j]
	}
	return dst
}
