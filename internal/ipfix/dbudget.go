package ipfix

import (
	"net/netip"
	"sync"
	"unsafe"
)

// Bounds of the template state (sessions, templates, interned strings)
// of the decoders that share a Budget.
const (
	// DefaultBudget is the bytes of template state all the decoders of
	// one collector may hold together.
	DefaultBudget = 64 << 20
	// DefaultExporterSessions bounds one exporter address's sessions
	// (observation domains; over UDP also source ports).
	DefaultExporterSessions = 256
	// DefaultExporterTemplates bounds one exporter address's templates.
	DefaultExporterTemplates = 4096
	// DefaultExporterShare is the part of the budget one exporter
	// address may hold: 1/16 (4 MiB of the default 64 MiB).
	DefaultExporterShare = 16
)

// ExporterLimits bound what one exporter address may hold in a Budget.
// An exporter over one of them makes room by forgetting its own least
// recently used session, never another exporter's. When the Budget as a
// whole is full, the exporter that holds the most gives up its least
// recently used session (max-min fairness, dfair.go): an exporter under
// its fair share (the budget ÷ the exporters) always gets its templates.
type ExporterLimits struct {
	Sessions  int   // default DefaultExporterSessions
	Templates int   // default DefaultExporterTemplates
	Bytes     int64 // default the budget / DefaultExporterShare
}

// Budget is the template state the decoders of one collector hold
// together: a byte total and, per exporter address, sessions, templates
// and bytes. It is safe for concurrent use; decoders take from it only
// when they learn something new (a session, a template, an interned
// string), never per record.
type Budget struct {
	limit int64
	per   ExporterLimits

	mu    sync.Mutex
	used  int64
	by    map[netip.Addr]*usage
	heavy usageHeap           // the exporters, most bytes first
	debts map[*Decoder][]debt // evictions owed by decoders that were busy (dfair.go)
	over  int64               // how far used may exceed limit while debts are paid
}

// usage is what one exporter address holds.
type usage struct {
	addr                netip.Addr
	sessions, templates int
	bytes               int64
	idx                 int                // in Budget.heavy
	in                  map[*Decoder]int64 // its bytes by decoder
}

// NewBudget returns a Budget of limit bytes (DefaultBudget when not
// positive) with per-exporter limits (defaults for the zero fields).
func NewBudget(limit int64, per ExporterLimits) *Budget {
	if limit <= 0 {
		limit = DefaultBudget
	}
	if per.Sessions <= 0 {
		per.Sessions = DefaultExporterSessions
	}
	if per.Templates <= 0 {
		per.Templates = DefaultExporterTemplates
	}
	if per.Bytes <= 0 {
		per.Bytes = limit / DefaultExporterShare
	}
	return &Budget{limit: limit, per: per, by: map[netip.Addr]*usage{}, debts: map[*Decoder][]debt{},
		over: max(limit/64, 64<<10)}
}

// Used returns the bytes held, and the limit.
func (b *Budget) Used() (used, limit int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.limit
}

// limitHit is which bound refused a take.
type limitHit uint8

const (
	hitNone limitHit = iota
	hitSessions
	hitTemplates
	hitBytes
	hitBudget
)

// take reserves sessions, templates and bytes for exporter a in decoder
// d, or reports the bound that refuses them (reserving nothing). When it
// is the budget, victim is whose session should go to make room.
func (b *Budget) take(d *Decoder, a netip.Addr, sessions, templates int, bytes int64) (limitHit, victim) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var hs, ht int
	var held int64
	if u := b.by[a]; u != nil {
		hs, ht, held = u.sessions, u.templates, u.bytes
	}
	switch {
	case sessions > 0 && hs+sessions > b.per.Sessions:
		return hitSessions, victim{}
	case templates > 0 && ht+templates > b.per.Templates:
		return hitTemplates, victim{}
	case bytes > 0 && held+bytes > b.per.Bytes:
		return hitBytes, victim{}
	}
	if bytes > 0 && b.used+bytes > b.limit {
		return hitBudget, b.victim(a, held)
	}
	b.add(d, a, sessions, templates, bytes)
	return hitNone, victim{}
}

// add charges exporter a in decoder d (b.mu held).
func (b *Budget) add(d *Decoder, a netip.Addr, sessions, templates int, bytes int64) {
	u := b.by[a]
	if u == nil {
		u = &usage{addr: a, in: map[*Decoder]int64{}}
		b.by[a] = u
		b.heavy.push(u)
	}
	u.sessions, u.templates, u.bytes = u.sessions+sessions, u.templates+templates, u.bytes+bytes
	u.in[d] += bytes
	b.used += bytes
	b.heavy.fix(u.idx)
}

// give returns what take reserved for exporter a in decoder d.
func (b *Budget) give(d *Decoder, a netip.Addr, sessions, templates int, bytes int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.by[a]
	if u == nil {
		return
	}
	u.sessions, u.templates, u.bytes = u.sessions-sessions, u.templates-templates, u.bytes-bytes
	b.used -= bytes
	if u.in[d] -= bytes; u.in[d] <= 0 {
		delete(u.in, d)
	}
	if u.sessions <= 0 && u.templates <= 0 && u.bytes <= 0 {
		delete(b.by, a)
		b.heavy.remove(u.idx)
		return
	}
	b.heavy.fix(u.idx)
}

// The costs charged to a Budget: conservative estimates of the heap each
// thing holds, allocation rounding and map growth included (the template
// flood test measures the heap against them).
var (
	// sessionCost: the session, its templates map's first group, its
	// entry in Decoder.sessions (a map that may be twice as large as its
	// entries while growing) and the Budget's usage entry.
	sessionCost = int64(unsafe.Sizeof(session{})) + 1024
	// selectorCost: one entry of a session's selector map.
	selectorCost = int64(64)
)

// templateCost is the charge of a template of n ops: the ops slice (size
// classes waste up to 1/8), the template and its map entry.
func templateCost(n int) int64 {
	ops := int64(n) * int64(unsafe.Sizeof(op{}))
	return ops + ops/8 + int64(unsafe.Sizeof(template{})) + 160
}

// stringCost is the charge of an interned string of n bytes held under a
// key of k bytes (0: the key is the string): both, and the map entry.
func stringCost(k, n int) int64 { return int64(k+n) + int64(k+n)/8 + 96 }
