package services

// Config.NoGroups: every row is held once per datapath it applies to, as
// a database without datapath groups holds it. The copies share the row's
// text, so this understates what a database would store.

// expand brings the per-datapath copies of every row the operation touched
// up to date.
func (m *Model) expand(t *tracker, cs *ChangeSet) {
	redo := map[*Row]struct{}{}
	for r := range t.rowsAdded {
		redo[r] = struct{}{}
	}
	for r := range t.rowsRegrouped {
		redo[r] = struct{}{}
	}
	for r := range t.rowsRemoved {
		cs.CopiesRemoved += len(r.copies)
		m.copies -= len(r.copies)
		r.copies = nil
	}
	if len(t.groupsTouched) > 0 {
		// A group changed in place: every row holding it changes copies.
		for _, l := range m.lbs {
			for _, r := range l.rows {
				if _, ok := t.groupsTouched[r.Group()]; ok {
					redo[r] = struct{}{}
				}
			}
			for _, ac := range l.arp {
				if ac != nil {
					if _, ok := t.groupsTouched[ac.g]; ok {
						redo[ac.row] = struct{}{}
					}
				}
			}
		}
	}
	for r := range redo {
		g := r.Group()
		have := make(map[int]*Row, len(r.copies))
		for _, c := range r.copies {
			have[c.dp] = c
		}
		var next []*Row
		g.members.each(func(i int) {
			if c := have[i]; c != nil {
				delete(have, i)
				next = append(next, c)
				return
			}
			c := &Row{ID: r.ID, Kind: r.Kind, Stage: r.Stage, Priority: r.Priority, Match: r.Match, Actions: r.Actions, LB: r.LB, dp: i}
			next = append(next, c)
			cs.CopiesAdded++
			m.copies++
		})
		cs.CopiesRemoved += len(have)
		m.copies -= len(have)
		r.copies = next
	}
}
