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
	var lo, hi uint64
	if len(en) > 0 {
		lo, hi = minMaxSigned(en)
		// End not constant: its own stream has a frame or delta header
		// (17 bytes) and at least a byte a row, so it cannot be shorter
		// than End-Start's stored bytes here and need not be made.
		if lo != hi && len(rel) <= 17+len(en) {
			e.append(cEnd, relEnc, relComp, rel, len(e.alt), lo, hi, flagEndRel)
			return
		}
	}
	copy(e.u, en)
	e.stream, enc, lo, hi = e.ie.encodeInts(e.stream[:0], e.u, true, true, false)
	if len(e.stream) < len(rel) {
		if data, comp, e.comp = e.compress(e.comp, enc, e.stream); len(data) <= len(rel) {
			e.append(cEnd, enc, comp, data, len(e.stream), lo, hi, 0)
			return
		}
	}
	e.append(cEnd, relEnc, relComp, rel, len(e.alt), lo, hi, flagEndRel)
}

// minMaxSigned returns the least and greatest of v (not empty) as int64s.
func minMaxSigned(v []uint64) (lo, hi uint64) {
	l, h := int64(v[0]), int64(v[0])
	for _, x := range v[1:] {
		l, h = min(l, int64(x)), max(h, int64(x))
	}
	return uint64(l), uint64(h)
}
