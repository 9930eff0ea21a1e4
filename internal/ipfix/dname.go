package ipfix

import (
	"math"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/weir-dev/weir/internal/flow"
)

// What exporters control beyond their counts: interface names (stored as
// partitions, printed on terminals) and times (stored as day partitions).

// MaxNameLen bounds an interface name from the network, in bytes.
const MaxNameLen = 64

// MaxNameKey is how much of a name as sent decides what it becomes (the
// decoder interns names by it): a rune sent becomes at least 3/4 of its
// length (an unprintable 4-byte rune becomes the 3-byte U+FFFD; anything
// else as long or longer), so a name of MaxNameLen bytes comes from at
// most MaxNameLen*4/3 bytes sent, and the rune after them, which decides
// the cut, ends 4 bytes later at most.
const MaxNameKey = MaxNameLen*4/3 + 4

// ifName is an interned interface name: as sent (cut to MaxNameKey) and
// as passed on.
type ifName struct{ raw, name string }

// SanitiseName appends to dst the name b as printable UTF-8 of at most
// MaxNameLen bytes: invalid bytes and unprintable runes (control
// characters, terminal escapes) become U+FFFD, and the name is cut at a
// rune boundary. It reports whether the name changed.
func SanitiseName(dst, b []byte) ([]byte, bool) { return sanitise(dst, b, MaxNameLen) }

// sanitise is SanitiseName with a bound of max bytes.
func sanitise(dst, b []byte, max int) ([]byte, bool) {
	if len(b) <= max {
		ok := true
		for _, c := range b {
			if c < 0x20 || c > 0x7e {
				ok = false
				break
			}
		}
		if ok {
			return append(dst, b...), false
		}
	}
	start, changed := len(dst), false
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		if (r == utf8.RuneError && size == 1) || !unicode.IsPrint(r) {
			r, changed = utf8.RuneError, true
		}
		if len(dst)-start+utf8.RuneLen(r) > max {
			return dst, true
		}
		dst = utf8.AppendRune(dst, r)
	}
	return dst, changed
}

// name interns the interface name b of session s, sanitised (the lookup
// with a converted key does not allocate). A name that does not fit (the
// session's maxNames, the exporter's or the budget's bounds) is
// flow.OtherIface, counted.
func (d *Decoder) name(s *session, b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > MaxNameKey {
		b = b[:MaxNameKey]
	}
	if string(b) == s.lastRaw {
		return s.lastName
	}
	if n, ok := s.names[string(b)]; ok {
		s.lastRaw, s.lastName = n.raw, n.name
		return n.name
	}
	if len(s.names) >= maxNames {
		d.stats.NamesRefused++
		return flow.OtherIface
	}
	var changed bool
	d.nameBuf, changed = SanitiseName(d.nameBuf[:0], b)
	n := ifName{raw: string(b)}
	cost := stringCost(len(b), 0)
	if changed {
		cost = stringCost(len(b), len(d.nameBuf))
		n.name = string(d.nameBuf)
	} else {
		n.name = n.raw
	}
	if !d.grow(s, cost) {
		d.stats.NamesRefused++
		return flow.OtherIface
	}
	if changed {
		d.stats.NamesSanitised++
	}
	if s.names == nil {
		s.names = map[string]ifName{}
	}
	s.names[n.raw] = n
	s.lastRaw, s.lastName = n.raw, n.name
	return n.name
}

// ifIndexName names an interface known only by its index: "if7".
func (d *Decoder) ifIndexName(s *session, i uint64) string {
	var buf [24]byte
	b := append(buf[:0], "if"...)
	b = appendUint(b, i)
	return d.name(s, b)
}

// retime gives a flow record received at now the receive time when its
// times lie further than MaxClockSkew from it, or it has none: End
// becomes now, Start now minus the duration when that is from 0 to
// MaxClockSkew, else now. Exporters' clocks and fields are theirs; the
// store's day partitions are the collector's.
func (d *Decoder) retime(r *flow.Record, now time.Time) {
	max := int64(d.cfg.MaxClockSkew)
	if max <= 0 {
		return
	}
	t := now.UnixNano()
	if r.Start == 0 && r.End == 0 {
		r.Start, r.End = t, t
		d.stats.NoTime++
		return
	}
	lo, hi := t-max, t+max
	if lo > t {
		lo = math.MinInt64
	}
	if hi < t {
		hi = math.MaxInt64
	}
	if r.Start >= lo && r.Start <= hi && r.End >= lo && r.End <= hi {
		return
	}
	d.stats.ClockSkew++
	dur := r.End - r.Start
	if r.End < r.Start || dur < 0 || dur > max {
		dur = 0
	}
	r.Start, r.End = t-dur, t
}
