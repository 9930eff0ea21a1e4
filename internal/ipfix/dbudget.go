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
// recently used session, never another exporter's.
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

	mu   sync.Mutex
	used int64
	by   map[netip.Addr]*usage
}

// usage is what one exporter address holds.
type usage struct {
	sessions, templates int
	bytes               int64
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
	return &Budget{limit: limit, per: per, by: map[netip.Addr]*usage{}}
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

// take reserves sessions, templates and bytes for exporter a, or reports
// the bound that refuses them (reserving nothing).
func (b *Budget) take(a netip.Addr, sessions, templates int, bytes int64) limitHit {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.by[a]
	if u == nil {
		u = &usage{}
	}
	switch {
	case sessions > 0 && u.sessions+sessions > b.per.Sessions:
		return hitSessions
	case templates > 0 && u.templates+templates > b.per.Templates:
		return hitTemplates
	case bytes > 0 && u.bytes+bytes > b.per.Bytes:
		return hitBytes
	case bytes > 0 && b.used+bytes > b.limit:
		return hitBudget
	}
	u.sessions, u.templates, u.bytes = u.sessions+sessions, u.templates+templates, u.bytes+bytes
	b.used += bytes
	b.by[a] = u
	return hitNone
}

// give returns what take reserved.
func (b *Budget) give(a netip.Addr, sessions, templates int, bytes int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.by[a]
	if u == nil {
		return
	}
	u.sessions, u.templates, u.bytes = u.sessions-sessions, u.templates-templates, u.bytes-bytes
	b.used -= bytes
	if u.sessions <= 0 && u.templates <= 0 && u.bytes <= 0 {
		delete(b.by, a)
	}
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
