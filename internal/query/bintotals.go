package query

import (
	"maps"
	"slices"
	"time"

	"github.com/weir-dev/weir/internal/store"
)

// Bin totals (Query.BinTotals): the sums per time bin of the rows a query
// matches, gathered in the same pass as its groups, so that a top N and
// the totals its chart stacks "other" against cost one read of the
// blocks, not two. A block whose summary puts all its starts in one bin
// is summed at once (its Start column is not read for them); any other
// block, and live records, bin row by row.

// totBin reports whether every row of block b (whole: all in the query's
// range) starts in one bin of q.BinTotals, and that bin's start.
// Partitioned workers share decoded blocks: they read Start always.
func (sc *scanner) totBin(b *store.BlockInfo, whole bool) (int64, bool) {
	if sc.q.BinTotals <= 0 || !whole || sc.parts > 1 {
		return 0, false
	}
	res := int64(sc.q.BinTotals)
	lo, hi, ok := b.Range(store.ColStart)
	t := floorDiv(int64(lo), res)
	return t * res, ok && int64(lo) == b.MinStart && t == floorDiv(int64(hi), res)
}

// addBinTotals adds the rows sel selects to the bin totals: at once into
// sc.totT for a one-bin block (sc.totOne), else each by its Start. Of
// partitioned workers, which all see every row, the first counts them.
func (sc *scanner) addBinTotals(c *store.Columns, sel []bool) {
	if sc.q.BinTotals <= 0 || sc.parts > 1 && sc.part != 0 {
		return
	}
	if sc.tot == nil {
		sc.tot = map[int64]*Counters{}
	}
	drops := hasDrops(c)
	n := c.N
	sel = sel[:n]
	if sc.totOne {
		var s Counters
		for i, ok := range sel {
			if ok {
				s.Packets += c.Packets[i]
				s.Bytes += c.Bytes[i]
				s.RevPackets += c.RevPackets[i]
				s.RevBytes += c.RevBytes[i]
				s.Flows++
				if drops {
					s.DropPackets += c.DropPackets[i]
					s.DropBytes += c.DropBytes[i]
				}
			}
		}
		if s.Flows != 0 {
			sc.binAdd(sc.totT, &s)
		}
		return
	}
	res := int64(sc.q.BinTotals)
	start := c.Start[:n]
	for i, ok := range sel {
		if !ok {
			continue
		}
		one := Counters{Packets: c.Packets[i], Bytes: c.Bytes[i], RevPackets: c.RevPackets[i], RevBytes: c.RevBytes[i], Flows: 1}
		if drops {
			one.DropPackets, one.DropBytes = c.DropPackets[i], c.DropBytes[i]
		}
		sc.binAdd(floorDiv(start[i], res)*res, &one)
	}
}

func (sc *scanner) binAdd(t int64, c *Counters) {
	if s := sc.tot[t]; s != nil {
		s.add(c)
		return
	}
	s := *c
	sc.tot[t] = &s
}

// binTotals merges the scanners' bin totals into rows keyed by their
// bins' starts, in time order: the rows of the same query grouped by time
// alone at that resolution, without a limit.
func binTotals(scans []*scanner) []Row {
	all := map[int64]*Counters{}
	for _, sc := range scans {
		for t, c := range sc.tot {
			if s := all[t]; s != nil {
				s.add(c)
			} else {
				all[t] = c
			}
		}
		sc.tot = nil
	}
	rows := make([]Row, 0, len(all))
	for _, t := range slices.Sorted(maps.Keys(all)) {
		rows = append(rows, Row{Key: Key{Time: time.Unix(0, t).UTC()}, Counters: *all[t]})
	}
	return rows
}
