package flow

// UpdateAggregates is UpdateAggregate for each aggregate of as, in order,
// with the same result; aggregates of no packets are ignored. It is
// pipelined as UpdateBatch is (chunk k+2's keys hashed and their
// fingerprints prefetched, chunk k+1's slots found and prefetched, chunk k
// applied), so the misses of a big table overlap. It does not allocate.
func (t *Table) UpdateAggregates(as []Aggregate) {
	if len(as) > 0 {
		t.batch(nil, as)
	}
}

// applyAggregate is UpdateAggregate of a, hashed into r.
func (t *Table) applyAggregate(a *Aggregate, r *pending) {
	if a.Packets == 0 {
		return
	}
	t.agg = a
	t.applyHit(&a.Packet, r)
	t.agg = nil
}
