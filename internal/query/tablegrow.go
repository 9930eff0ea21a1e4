package query

// grow doubles the table: in place when its slots are a mapping the
// kernel extends (growSlots), else into a new table (resize). In place,
// only the new half is faulted in, where a new table faults in twice the
// old one's pages (the kernel zeroing them was ~11% of sip,dip where
// dport = 443) and copies every group to a random slot of it.
func (t *table) grow() {
	old := len(t.slots)
	p := t.emptySlot()
	if p < 0 {
		t.resize(2 * old)
		return
	}
	slots, mem, ok := growSlots(t.mem, 2*old)
	if !ok {
		t.resize(2 * old)
		return
	}
	t.slots, t.mem = slots, mem
	t.split(old, p)
}

// emptySlot is the index of an empty slot, or -1 when none is (the load
// limit always leaves some).
func (t *table) emptySlot() int {
	for i := range t.slots {
		if t.slots[i].c.Flows == 0 {
			return i
		}
	}
	return -1
}

// split rehashes in place a table whose slots have just doubled from old
// (its groups in the lower half, empty slot p among them; the upper half
// empty). A group's home is its hash's low bits, so doubling sends it to
// the same home or to home+old. split walks the old slots in probe order
// from just after p, so that no run of full slots is entered in its
// middle, and takes each group out and puts it back by probing from its
// new home: a group homed in the lower half stops at its own old slot at
// the latest, so it never passes a slot still to be walked, and a group
// homed in the upper half meets only groups already put back. A probe
// that would wrap from the last slot to the first could pass slots not yet
// walked: those groups are put back last, when every slot is final. It
// returns how many were (for tests).
func (t *table) split(old, p int) int {
	size := len(t.slots)
	t.mask = uint64(size - 1)
	sl := t.slots
	om := old - 1
	var late []slot
	for n := 1; n <= old; n++ {
		i := (p + n) & om
		if sl[i].c.Flows == 0 {
			continue
		}
		e := sl[i]
		sl[i] = slot{}
		j := int(e.k.hash() & t.mask)
		for j < size && sl[j].c.Flows != 0 {
			j++
		}
		if j == size {
			late = append(late, e)
			continue
		}
		sl[j] = e
	}
	for i := range late {
		j := late[i].k.hash() & t.mask
		for sl[j].c.Flows != 0 {
			j = (j + 1) & t.mask
		}
		sl[j] = late[i]
	}
	return len(late)
}
