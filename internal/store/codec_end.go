package store

import "slices"

// putEnd stores End as End-Start or directly, whichever is smaller once
// compressed. Rows sorted by Start make End-Start the smaller as a rule, so
// End itself is compressed only when its raw stream is already smaller
// than End-Start's stored bytes (e.g. a constant End).
func (e *blockEncoder) putEnd() {
	st, en := e.cv[cStart], e.end
	e.u = slices.Grow(e.u[:0], len(en))[:len(en)]
	for i := range en {
		e.u[i] = en[i] - st[i]
	}
	var enc, relEnc, comp, relComp uint8
	var data, rel []byte
	e.alt, relEnc, _, _ = e.ie.encodeInts(e.alt[:0], e.u, true, true, false)
	rel, relComp, e.comp2 = e.compress(e.comp2, relEnc, e.alt)
	copy(e.u, en)
	var lo, hi uint64
	e.stream, enc, lo, hi = e.ie.encodeInts(e.stream[:0], e.u, true, true, false)
	if len(e.stream) < len(rel) {
		if data, comp, e.comp = e.compress(e.comp, enc, e.stream); len(data) <= len(rel) {
			e.append(cEnd, enc, comp, data, len(e.stream), lo, hi, 0)
			return
		}
	}
	e.append(cEnd, relEnc, relComp, rel, len(e.alt), lo, hi, flagEndRel)
}
