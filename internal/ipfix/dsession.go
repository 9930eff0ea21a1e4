package ipfix

import (
	"net/netip"
	"time"
)

// Sessions: RFC 7011 scopes templates to the transport session and the
// observation domain; over UDP the session is the exporter's address and
// port. A decoder keeps its sessions in a map and, per exporter address,
// in a list from most to least recently used, so an exporter over its
// limits (Budget) makes room by forgetting its own stalest session.
// Everything a session holds is charged to the Budget and given back when
// the session goes.

// sessionKey is a template scope.
type sessionKey struct {
	from    netip.AddrPort
	domain  uint32
	version uint16
}

type session struct {
	key       sessionKey
	seen      time.Time // last message
	created   time.Time
	data      bool // a flow record was decoded
	cost      int64
	templates map[uint16]*template
	nextSeq   uint32 // NetFlow: expected sequence number of the next message
	lastSeq   uint32 // IPFIX: the last message's sequence number,
	lastN     uint32 // its data records
	lastFlows uint32 // and of them flow records
	seqKnown  bool   // the last message can be checked against
	seqRules  seqRules
	// back: the last message's number went back; it is held (backSeq
	// is what a message following it is numbered, for IPFIX its own
	// number, with its backN records, backFlows flows) until the next
	// one tells whether it was late or the exporter restarted.
	back                      bool
	backSeq, backN, backFlows uint32
	names                     map[string]ifName // interface names by their raw bytes (cut to MaxNameKey)
	sampling                  uint32            // 1-in-N of records that name no selector: options data without one, or the v5 header
	selectors                 map[uint64]uint32 // selectorId → 1-in-N, from options data (at most maxSelectors)
	lastSel                   uint64            // the selector last looked up
	lastSelN                  uint32            // and its interval (0: none)
	sysInit                   int64             // systemInitTimeMilliseconds from options data, Unix ms
	expiry                    time.Time         // next time expire looks at the templates
	lastRaw                   string            // the last interface name as sent (cut), and
	lastName                  string            // what it became: records come in runs
	ent                       entIntern         // interned enterprise values (dent.go)
	node                      string            // the observation domain's name from options data (node.go), "" for none
	lastNodeRaw, lastNode     string            // the last node name as sent and what it became
	// newer and older link the sessions of one exporter address in a
	// decoder, most recently used first.
	newer, older *session
}

// exporterList is a decoder's sessions of one exporter address.
type exporterList struct{ newest, oldest *session }

// EvictReason is why a session was forgotten before its exporter ended it.
type EvictReason uint8

// Eviction reasons.
const (
	EvictExporterSessions  EvictReason = iota // its exporter opened one session too many: its least recently used went
	EvictExporterTemplates                    // its exporter had too many templates
	EvictExporterBytes                        // its exporter held too many bytes of template state
	EvictNoData                               // no flow record came within DecoderConfig.DatalessTimeout of its start
	EvictIdle                                 // no message came for the template timeout
	EvictBudgetFull                           // the Budget was full and its exporter held the most of it (dfair.go)
	numEvictReasons
)

// NumEvictReasons is the number of EvictReason values.
const NumEvictReasons = int(numEvictReasons)

var evictReasonNames = [numEvictReasons]string{"exporter_sessions", "exporter_templates", "exporter_bytes", "no_data", "idle", "budget_full"}

// String returns the reason's metric label.
func (r EvictReason) String() string {
	if r < numEvictReasons {
		return evictReasonNames[r]
	}
	return "unknown"
}

// session finds or makes the session of key, within the bounds.
func (d *Decoder) session(key sessionKey) (*session, error) {
	now := d.cfg.Now()
	if now.After(d.nextSweep) {
		d.sweep(now)
	}
	if d.last != nil && d.lastKey == key {
		d.last.seen = now
		return d.last, nil
	}
	if s := d.sessions[key]; s != nil {
		s.seen = now
		d.touch(s)
		d.last, d.lastKey = s, key
		return s, nil
	}
	if len(d.sessions) >= d.cfg.MaxSessions && (d.sweep(now) == 0 || len(d.sessions) >= d.cfg.MaxSessions) {
		return nil, d.fail(ErrTooManySessions, "%d sessions", len(d.sessions))
	}
	s := &session{key: key, templates: map[uint16]*template{}, seen: now, created: now}
	if err := d.reserve(s, 1, 0, sessionCost); err != nil {
		return nil, err
	}
	s.cost = sessionCost
	d.sessions[key] = s
	d.link(s)
	d.last, d.lastKey = s, key
	return s, nil
}

// reserve charges s's exporter for sessions, templates and bytes. An
// exporter over its own limits first forgets its least recently used
// session other than s (and other than the session of the message being
// decoded). A full budget first forgets the sessions whose time is up (at
// most once a second), then the least recently used session of the
// exporter holding the most (dfair.go). What still does not fit is
// refused, counted.
func (d *Decoder) reserve(s *session, sessions, templates int, bytes int64) error {
	a := s.key.from.Addr()
	var waited time.Duration
	for {
		hit, v := d.budget.take(d, a, sessions, templates, bytes)
		switch hit {
		case hitNone:
			return nil
		case hitBudget:
			if now := d.cfg.Now(); now.After(d.nextSweep) && d.sweep(now) > 0 {
				continue
			}
			if d.makeRoom(s, v) {
				continue
			}
			if v.dec != nil && v.dec != d {
				if d.budget.lend(d, a, sessions, templates, bytes, v) {
					if v.dec.mu.TryLock() { // it may have gone idle meanwhile: pay now
						v.dec.unlock()
					}
					return nil
				}
				if waited < maxWait { // the overdraft is spent: give the busy decoder a moment to pay
					t0 := time.Now()
					v.dec.wait()
					waited += time.Since(t0)
					continue
				}
			}
			used, limit := d.budget.Used()
			return d.fail(ErrTemplateBudget, "%d of %d bytes held, %d more wanted", used, limit, bytes)
		default:
			var v *session
			if l := d.exporters[a]; l != nil {
				v = l.oldest
			}
			for v != nil && (v == s || v == d.cur) {
				v = v.newer
			}
			if v == nil {
				return d.fail(ErrExporterLimit, "exporter %s over its %s limit", a, [...]string{hitSessions: "session",
					hitTemplates: "template", hitBytes: "byte"}[hit])
			}
			d.evict(v, EvictReason(hit-hitSessions)+EvictExporterSessions)
		}
	}
}

// grow charges bytes to s, reporting whether they fit (refusals are
// counted by reserve).
func (d *Decoder) grow(s *session, bytes int64) bool {
	if d.reserve(s, 0, 0, bytes) != nil {
		return false
	}
	s.cost += bytes
	return true
}

// shrink gives back bytes s was charged.
func (d *Decoder) shrink(s *session, bytes int64) {
	s.cost -= bytes
	d.budget.give(d, s.key.from.Addr(), 0, 0, bytes)
}

// sweep forgets the sessions whose time is up (not the one being decoded)
// and returns how many. Stream sessions live as long as their connection.
// It walks each exporter's list from its oldest session, so the work done
// does not depend on the order of a map (nor does the fuzzers' coverage).
func (d *Decoder) sweep(now time.Time) int {
	d.nextSweep = now.Add(time.Second)
	if d.cfg.Stream {
		return 0
	}
	n := 0
	for _, l := range d.exporters {
		for s := l.oldest; s != nil; {
			next := s.newer
			switch {
			case s == d.cur:
			case !s.data && d.cfg.DatalessTimeout > 0 && now.Sub(s.created) > d.cfg.DatalessTimeout:
				d.evict(s, EvictNoData)
				n++
			case now.Sub(s.seen) > d.cfg.TemplateTimeout:
				d.stats.Expired += uint64(len(s.templates)) // none refreshed in time
				d.evict(s, EvictIdle)
				n++
			}
			s = next
		}
	}
	return n
}

// Sweep forgets the sessions whose time is up: silent for the template
// timeout, or without a flow record for DatalessTimeout since they began.
// Decode does it at most once a second, and so does Sweep; a collector
// calls it when its socket is idle, so that their budget comes back
// without traffic.
func (d *Decoder) Sweep() {
	d.mu.Lock()
	defer d.unlock()
	if now := d.cfg.Now(); now.After(d.nextSweep) {
		d.sweep(now)
	}
}

// evict forgets session v, counted.
func (d *Decoder) evict(v *session, why EvictReason) {
	d.drop(v)
	d.stats.Evicted[why]++
}

// drop forgets session v and gives back what it held.
func (d *Decoder) drop(v *session) {
	delete(d.sessions, v.key)
	d.unlink(v)
	d.live -= len(v.templates)
	d.budget.give(d, v.key.from.Addr(), 1, len(v.templates), v.cost)
	if d.last == v {
		d.last = nil
	}
}

// Forget drops the templates of every session of exporter (its TCP
// connection closed).
func (d *Decoder) Forget(exporter netip.AddrPort) {
	d.mu.Lock()
	defer d.unlock()
	if l := d.exporters[exporter.Addr()]; l != nil {
		for s := l.oldest; s != nil; {
			next := s.newer
			if s.key.from == exporter {
				d.drop(s)
			}
			s = next
		}
	}
}

// Close forgets every session, giving back the budget they held. The
// Decoder may be used again.
func (d *Decoder) Close() {
	d.mu.Lock()
	defer d.unlock()
	for _, l := range d.exporters {
		for l.oldest != nil {
			d.drop(l.oldest)
		}
	}
}

// link makes s its exporter's most recently used session.
func (d *Decoder) link(s *session) {
	a := s.key.from.Addr()
	l := d.exporters[a]
	if l == nil {
		l = &exporterList{}
		d.exporters[a] = l
	}
	s.newer, s.older = nil, l.newest
	if l.newest != nil {
		l.newest.newer = s
	}
	l.newest = s
	if l.oldest == nil {
		l.oldest = s
	}
}

// unlink takes s out of its exporter's list.
func (d *Decoder) unlink(s *session) {
	a := s.key.from.Addr()
	l := d.exporters[a]
	if l == nil {
		return
	}
	if s.newer != nil {
		s.newer.older = s.older
	} else {
		l.newest = s.older
	}
	if s.older != nil {
		s.older.newer = s.newer
	} else {
		l.oldest = s.newer
	}
	s.newer, s.older = nil, nil
	if l.newest == nil {
		delete(d.exporters, a)
	}
}

// touch makes s its exporter's most recently used session.
func (d *Decoder) touch(s *session) {
	if l := d.exporters[s.key.from.Addr()]; l != nil && l.newest != s {
		d.unlink(s)
		d.link(s)
	}
}

// expire forgets the session's templates not refreshed since the timeout.
func (d *Decoder) expire(s *session, now time.Time) {
	if d.cfg.Stream || now.Before(s.expiry) {
		return // at most once a second: a template may outlive its timeout by 1 s
	}
	s.expiry = now.Add(time.Second)
	for id, t := range s.templates {
		if now.Sub(t.seen) > d.cfg.TemplateTimeout {
			d.forgetTemplate(s, id, t)
			d.stats.Expired++
		}
	}
}

// forgetTemplate drops template id of s and gives back its charge.
func (d *Decoder) forgetTemplate(s *session, id uint16, t *template) {
	delete(s.templates, id)
	d.live--
	s.cost -= t.cost
	d.budget.give(d, s.key.from.Addr(), 0, 1, t.cost)
}
