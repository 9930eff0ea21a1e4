package ipfix

import (
	"net/netip"
	"runtime"
	"time"
)

// maxWait bounds how long one reservation waits, in all, for busy
// decoders to pay their debts once the overdraft is spent.
const maxWait = 50 * time.Millisecond

// Max-min fairness of a full Budget. When an exporter needs bytes the
// budget has not got, the exporter holding the most gives up its least
// recently used session: the requester's own when it is that exporter
// (or holds as much), another's otherwise. So an exporter under its fair
// share (the budget ÷ the exporters) always gets its template in, and
// many addresses that each stay within their own limits cannot lock out
// a newcomer. The exporters are kept in a heap by bytes held: finding
// the largest is O(1), each charge O(log n).
//
// The largest exporter's sessions may live in another decoder, which
// another goroutine runs. Each Decoder has a mutex that its own calls
// hold (uncontended but for this). A requester takes the other's with
// TryLock and, when it gets it (the decoder is idle), evicts there and
// then; when the other is busy decoding, the requester records a debt
// for it and is granted the bytes as an overdraft of at most 1/64 of the
// budget, which the busy decoder pays (evicting the same exporter's
// least recently used sessions) as it releases its mutex, before its
// next message. No decoder ever waits for another's mutex.

// victim is the exporter that should give up a session, and the decoder
// holding most of its bytes (nil: the requester's own).
type victim struct {
	addr netip.Addr
	dec  *Decoder
}

// debt is bytes a decoder owes the budget, to be freed from exporter
// addr's least recently used sessions.
type debt struct {
	addr  netip.Addr
	bytes int64
}

// victim returns the exporter that should make room for a, which holds
// held bytes (b.mu held). It is the exporter holding the most unless
// that holds no more than a: then a itself.
func (b *Budget) victim(a netip.Addr, held int64) victim {
	if len(b.heavy) == 0 || b.heavy[0].addr == a || b.heavy[0].bytes <= held {
		return victim{addr: a}
	}
	u := b.heavy[0]
	v := victim{addr: u.addr}
	most := int64(-1)
	for d, n := range u.in { // the decoders holding one exporter's sessions: its sockets and connections, a few
		if n > most {
			v.dec, most = d, n
		}
	}
	return v
}

// lend charges a in decoder d beyond the limit, by at most b.over in
// all, recording that decoder owes as many bytes of exporter v.addr's
// sessions; it reports whether it did.
func (b *Budget) lend(d *Decoder, a netip.Addr, sessions, templates int, bytes int64, v victim) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+bytes > b.limit+b.over {
		return false
	}
	b.add(d, a, sessions, templates, bytes)
	b.debts[v.dec] = append(b.debts[v.dec], debt{v.addr, bytes})
	v.dec.owes.Store(true)
	return true
}

// owed takes decoder d's debts.
func (b *Budget) owed(d *Decoder) []debt {
	b.mu.Lock()
	defer b.mu.Unlock()
	ds := b.debts[d]
	delete(b.debts, d)
	d.owes.Store(false)
	return ds
}

// makeRoom evicts a session of v to make room for s (of exporter a),
// reporting whether it did. Another decoder's session goes only if that
// decoder is idle (TryLock).
func (d *Decoder) makeRoom(s *session, v victim) bool {
	switch {
	case v.dec == nil || v.dec == d:
		return d.evictOldest(v.addr, s)
	case v.dec.mu.TryLock():
		ok := v.dec.evictOldest(v.addr, nil)
		v.dec.unlock()
		return ok
	}
	return false
}

// evictOldest evicts exporter a's least recently used session other than
// keep and the session being decoded, reporting whether there was one.
func (d *Decoder) evictOldest(a netip.Addr, keep *session) bool {
	var v *session
	if l := d.exporters[a]; l != nil {
		v = l.oldest
	}
	for v != nil && (v == keep || v == d.cur) {
		v = v.newer
	}
	if v == nil {
		return false
	}
	d.evict(v, EvictBudgetFull)
	return true
}

// wait waits, at most a few milliseconds, for d to be free, and then
// lets it pay what it owes.
func (d *Decoder) wait() {
	for t0 := time.Now(); time.Since(t0) < 5*time.Millisecond; runtime.Gosched() {
		if d.mu.TryLock() {
			d.unlock()
			return
		}
	}
}

// pay evicts what d owes the budget (d.mu held).
func (d *Decoder) pay() {
	for _, x := range d.budget.owed(d) {
		for freed := int64(0); freed < x.bytes; {
			l := d.exporters[x.addr]
			if l == nil {
				break // gone already: the overdraft ends as its sessions do
			}
			freed += l.oldest.cost
			d.evict(l.oldest, EvictBudgetFull)
		}
	}
}

// unlock releases d.mu, first paying what d owes. Whoever releases it
// looks again afterwards, so a debt recorded while someone held it
// (TryLock failed) is paid at once.
func (d *Decoder) unlock() {
	for {
		if d.owes.Load() {
			d.pay()
		}
		d.mu.Unlock()
		if !d.owes.Load() || !d.mu.TryLock() {
			return
		}
	}
}

// usageHeap orders exporters by bytes held, most first; each knows its
// index.
type usageHeap []*usage

func (h usageHeap) less(i, j int) bool { return h[i].bytes > h[j].bytes }

func (h usageHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}

func (h *usageHeap) push(u *usage) {
	u.idx = len(*h)
	*h = append(*h, u)
	h.up(u.idx)
}

func (h *usageHeap) remove(i int) {
	n := len(*h) - 1
	if i != n {
		h.swap(i, n)
	}
	(*h)[n] = nil
	*h = (*h)[:n]
	if i != n {
		h.fix(i)
	}
}

func (h usageHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h usageHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

// down sifts i down, reporting whether it moved.
func (h usageHeap) down(i int) bool {
	i0 := i
	for {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if r := c + 1; r < len(h) && h.less(r, c) {
			c = r
		}
		if !h.less(c, i) {
			break
		}
		h.swap(i, c)
		i = c
	}
	return i > i0
}
