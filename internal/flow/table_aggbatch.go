package flow

// UpdateAggregates is UpdateAggregate for each aggregate of as, in order,
// with the same result; aggregates of no packets are ignored. It is
// pipelined as UpdateBatch is (the key of aggregate i+2D hashed and its
// tags prefetched, i+D's slot prefetched, i applied), so the misses of a
// big table overlap. It does not allocate.
func (t *Table) UpdateAggregates(as []Aggregate) {
	if t.n <= smallTable {
		t.updateAggregatesSmall(as)
		return
	}
	const d = prefetchDistance
	var ring [4 * d]pending
	n := len(as)
	for i := 0; i < min(n, 2*d); i++ {
		t.hashAhead(&as[i].Packet, &ring[i])
	}
	for i := 0; i < min(n, d); i++ {
		t.slotAhead(&ring[i])
	}
	for i := range as {
		r := &ring[i&(4*d-1)]
		t.applyAggregate(&as[i], r)
		if k := i + 2*d; k < n {
			t.hashAhead(&as[k].Packet, &ring[k&(4*d-1)])
		}
		if k := i + d; k < n {
			t.slotAhead(&ring[k&(4*d-1)])
		}
	}
}

// updateAggregatesSmall is UpdateAggregates for small tables, in the
// chunks of updateBatchSmall.
func (t *Table) updateAggregatesSmall(as []Aggregate) {
	const d = prefetchDistance
	var ring [2 * d]pending // chunk c in half c&1
	n := len(as)
	t.stageAggregates(as[:min(n, d)], &ring[0])
	for c := 0; c < n; c += d {
		if k := c + d; k < n {
			t.stageAggregates(as[k:min(n, k+d)], &ring[k&d])
		}
		for i := c; i < min(n, c+d); i++ {
			t.applyAggregate(&as[i], &ring[i&(2*d-1)])
		}
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
