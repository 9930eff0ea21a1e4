package ipfix

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// Defaults and bounds of DecoderConfig.
const (
	// DefaultTemplateTimeout: a template not refreshed for this long is
	// forgotten (RFC 7011 8.4 leaves the lifetime to the collector; several
	// refresh intervals of common exporters).
	DefaultTemplateTimeout = 30 * time.Minute
	DefaultMaxSessions     = 4096 // exporter and domain pairs
	DefaultMaxTemplates    = 512  // per session
	// MaxFields bounds a template's fields: every field costs at least 4
	// bytes of template, so no real message needs more.
	MaxFields = 512
	// maxNames bounds the interface names interned per session.
	maxNames = 256
	// maxSelectors bounds the sampling selectors (selectorId → interval,
	// from options data) remembered per session.
	maxSelectors = 64
)

// DecoderConfig configures a Decoder.
type DecoderConfig struct {
	TemplateTimeout time.Duration // default DefaultTemplateTimeout
	MaxSessions     int           // default DefaultMaxSessions
	MaxTemplates    int           // per session; default DefaultMaxTemplates
	Now             func() time.Time
	// OnGap, if set, is called for each sequence gap with the session's
	// exporter and observation domain, from the goroutine calling Decode
	// (gaps are rare: this is how they are told apart by exporter).
	OnGap func(exporter netip.AddrPort, domain uint32)
	// PEN is the Private Enterprise Number under which weir's enterprise
	// elements (workloads, service, rule, conntrack mark and zone;
	// enterprise.go) are read; 0: they are skipped, as every other
	// enterprise's elements are.
	PEN uint32
}

// DecodeError is why a message, set or record could not be decoded.
type DecodeError uint8

// Decode errors.
const (
	ErrShortHeader        DecodeError = iota // shorter than its version's header
	ErrBadVersion                            // not 5, 9 or 10
	ErrBadLength                             // message length field disagrees with the bytes
	ErrBadSetLength                          // a set runs past the message or is under 4 bytes
	ErrUnknownTemplate                       // data set for a template never seen (or withdrawn, expired)
	ErrBadTemplate                           // template record malformed (ids, field count, lengths)
	ErrTooManyTemplates                      // a session's template bound was reached
	ErrTooManySessions                       // the exporter×domain bound was reached
	ErrBadFieldLength                        // a variable-length field runs past its set
	ErrBadCount                              // NetFlow v5 count disagrees with the length
	ErrTooManySelectors                      // a session's bound of sampling selectors was reached: the new one is ignored
	ErrUnknownSelector                       // a record names a selector no options data announced: its sampling is unknown
	ErrBadEnterpriseField                    // one of weir's enterprise elements (DecoderConfig.PEN) at a length or with a value weir never sends: skipped
	numDecodeErrors
)

// NumDecodeErrors is the number of DecodeError values.
const NumDecodeErrors = int(numDecodeErrors)

var decodeErrorNames = [numDecodeErrors]string{"short_header", "bad_version", "bad_length", "bad_set_length",
	"unknown_template", "bad_template", "too_many_templates", "too_many_sessions", "bad_field_length", "bad_count",
	"too_many_selectors", "unknown_selector", "bad_enterprise_field"}

// String returns the error's metric label.
func (e DecodeError) String() string {
	if e < numDecodeErrors {
		return decodeErrorNames[e]
	}
	return fmt.Sprintf("error_%d", e)
}

// ErrDecode is wrapped by every error Decode returns; errors.As gives the
// *Error with its reason.
var ErrDecode = errors.New("ipfix: decode")

// Error is a decode failure with its reason.
type Error struct {
	Reason DecodeError
	Detail string
}

func (e *Error) Error() string { return "ipfix: " + e.Reason.String() + ": " + e.Detail }

// Unwrap makes errors.Is(err, ErrDecode) true.
func (e *Error) Unwrap() error { return ErrDecode }

// DecodeStats are a Decoder's counters.
type DecodeStats struct {
	Messages       [3]uint64 // by version: NetFlow v5, v9, IPFIX
	Records        uint64    // flow records emitted
	OptionsRecords uint64    // options data records (kept, not emitted)
	Templates      uint64    // template records learnt (refreshes included)
	Withdrawals    uint64    // templates withdrawn
	Expired        uint64    // templates forgotten for want of refresh
	TemplatesLive  uint64    // templates held now
	SequenceGaps   uint64    // messages whose sequence number was not the expected one
	SkippedSets    uint64    // data sets skipped (unknown template)
	// InternFull counts the times a session's table of interned
	// enterprise values (workloads, services, rules) was full and was
	// emptied to take a new one.
	InternFull uint64
	Errors     [NumDecodeErrors]uint64
}

// Add adds o's counters to s (TemplatesLive too: live templates of
// several decoders add up).
func (s *DecodeStats) Add(o *DecodeStats) {
	for i := range s.Messages {
		s.Messages[i] += o.Messages[i]
	}
	s.Records += o.Records
	s.OptionsRecords += o.OptionsRecords
	s.Templates += o.Templates
	s.Withdrawals += o.Withdrawals
	s.Expired += o.Expired
	s.TemplatesLive += o.TemplatesLive
	s.SequenceGaps += o.SequenceGaps
	s.SkippedSets += o.SkippedSets
	s.InternFull += o.InternFull
	for i := range s.Errors {
		s.Errors[i] += o.Errors[i]
	}
}

// sessionKey is a template scope: RFC 7011 scopes templates to the
// transport session and observation domain; for UDP the session is the
// exporter's address and port.
type sessionKey struct {
	from    netip.AddrPort
	domain  uint32
	version uint16
}

type session struct {
	key       sessionKey
	seen      time.Time // last message
	templates map[uint16]*template
	nextSeq   uint32 // NetFlow: expected sequence number of the next message
	lastSeq   uint32 // IPFIX: the last message's sequence number,
	lastN     uint32 // its data records
	lastFlows uint32 // and of them flow records
	seqKnown  bool   // the last message can be checked against
	seqRules  seqRules
	names     map[string]string
	sampling  uint32            // 1-in-N of records that name no selector: options data without one, or the v5 header
	selectors map[uint64]uint32 // selectorId → 1-in-N, from options data (at most maxSelectors)
	lastSel   uint64            // the selector last looked up
	lastSelN  uint32            // and its interval (0: none)
	sysInit   int64             // systemInitTimeMilliseconds from options data, Unix ms
	expiry    time.Time         // next time expire looks at the templates
	lastName  string            // the last interface name: records come in runs
	ent       entIntern         // interned enterprise values (dent.go)
}

// Decoder decodes IPFIX, NetFlow v9 and v5 messages into flow records. It
// is not safe for concurrent use: give each socket or connection its own.
type Decoder struct {
	cfg      DecoderConfig
	sessions map[sessionKey]*session
	stats    DecodeStats
	rec      flow.Record
	live     int      // templates held
	ops      []op     // scratch for compiling templates
	last     *session // the last message's session: exporters send in runs
	lastKey  sessionKey
	// entS are the workload and service strings of the record being
	// decoded (dent.go), entKeyBuf the scratch of their interning key.
	entS      [9][]byte
	entKeyBuf []byte
}

// NewDecoder returns a Decoder.
func NewDecoder(cfg DecoderConfig) *Decoder {
	if cfg.TemplateTimeout <= 0 {
		cfg.TemplateTimeout = DefaultTemplateTimeout
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.MaxTemplates <= 0 {
		cfg.MaxTemplates = DefaultMaxTemplates
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Decoder{cfg: cfg, sessions: map[sessionKey]*session{}}
}

// Stats returns the counters.
func (d *Decoder) Stats() DecodeStats {
	s := d.stats
	s.TemplatesLive = uint64(d.live)
	return s
}

// Forget drops the templates of every session of exporter (its TCP
// connection closed).
func (d *Decoder) Forget(exporter netip.AddrPort) {
	for k, s := range d.sessions {
		if k.from == exporter {
			d.live -= len(s.templates)
			delete(d.sessions, k)
			d.last = nil
		}
	}
}

// Sampling returns the 1-in-N packet sampling interval an exporter's
// options data without a selector (or NetFlow v5 header) announced for
// domain, or 0. Decoded records carry their own in flow.Record.Sampling.
func (d *Decoder) Sampling(exporter netip.AddrPort, domain uint32) uint32 {
	for _, v := range []uint16{Version, 9, 5} {
		if s := d.sessions[sessionKey{exporter, domain, v}]; s != nil && s.sampling != 0 {
			return s.sampling
		}
	}
	return 0
}

func (d *Decoder) fail(reason DecodeError, format string, a ...any) error {
	d.stats.Errors[reason]++
	return &Error{Reason: reason, Detail: fmt.Sprintf(format, a...)}
}

// session finds or makes the session of key, within the bound.
func (d *Decoder) session(key sessionKey) (*session, error) {
	now := d.cfg.Now()
	if d.last != nil && d.lastKey == key {
		d.last.seen = now
		return d.last, nil
	}
	if s := d.sessions[key]; s != nil {
		s.seen = now
		d.last, d.lastKey = s, key
		return s, nil
	}
	if len(d.sessions) >= d.cfg.MaxSessions {
		// Exporters that restart come back from new source ports: make
		// room by forgetting sessions silent for the template timeout.
		for k, s := range d.sessions {
			if now.Sub(s.seen) > d.cfg.TemplateTimeout {
				d.live -= len(s.templates)
				delete(d.sessions, k)
				d.last = nil
			}
		}
		if len(d.sessions) >= d.cfg.MaxSessions {
			return nil, d.fail(ErrTooManySessions, "%d sessions", len(d.sessions))
		}
	}
	s := &session{key: key, templates: map[uint16]*template{}, seen: now}
	d.sessions[key] = s
	d.last, d.lastKey = s, key
	return s, nil
}

// Decode decodes one message received from exporter and calls emit for
// each flow record; the record is reused after emit returns. Records
// emitted before an error stay emitted. Every error is counted by reason
// and wraps ErrDecode.
func (d *Decoder) Decode(exporter netip.AddrPort, msg []byte, emit func(*flow.Record)) error {
	if len(msg) < 4 {
		return d.fail(ErrShortHeader, "%d bytes", len(msg))
	}
	switch binary.BigEndian.Uint16(msg) {
	case Version:
		return d.decodeIPFIX(exporter, msg, emit)
	case 9:
		return d.decodeV9(exporter, msg, emit)
	case 5:
		return d.decodeV5(exporter, msg, emit)
	}
	return d.fail(ErrBadVersion, "version %d", binary.BigEndian.Uint16(msg))
}

// gap counts a sequence gap of session s.
func (d *Decoder) gap(s *session) {
	d.stats.SequenceGaps++
	if d.cfg.OnGap != nil {
		d.cfg.OnGap(s.key.from, s.key.domain)
	}
}

// seqRules is the set of numbering rules an IPFIX exporter's messages
// are still consistent with: RFC 7011 counts every data record (options
// data included) sent before the message; softflowd 1.1.0 counts flow
// records up to and including the message, without options data.
type seqRules uint8

const (
	seqBefore     seqRules = 1 << iota // all data records before the message (RFC 7011)
	seqBeforeFlow                      // flow records before the message
	seqIncl                            // all data records up to and including it
	seqInclFlow                        // flow records up to and including it
	seqAll        = seqBefore | seqBeforeFlow | seqIncl | seqInclFlow
)

// sequence checks a message's sequence number against the session's
// expectation and sets the next one.
func (d *Decoder) sequence(s *session, seq, next uint32) {
	if s.seqKnown && seq != s.nextSeq {
		d.gap(s)
	}
	s.nextSeq, s.seqKnown = next, true
}

// sequenceIPFIX checks an IPFIX message that carried n data records, of
// them flows flow records. Exporters differ in what they count (see
// seqRules); a session keeps the rules its messages agree with, so an
// exporter's own numbering is not reported as gaps while a lost message
// still is. A message whose records could not all be counted (a set of an
// unknown template, a decoding error) resynchronises instead.
func (d *Decoder) sequenceIPFIX(s *session, seq, n, flows uint32, counted bool) {
	if s.seqRules == 0 {
		s.seqRules = seqAll
	}
	if s.seqKnown && counted {
		var match seqRules
		for r, want := range [4]uint32{s.lastSeq + s.lastN, s.lastSeq + s.lastFlows, s.lastSeq + n, s.lastSeq + flows} {
			if seq == want {
				match |= 1 << r
			}
		}
		if s.seqRules&match != 0 {
			s.seqRules &= match
		} else {
			d.gap(s)
		}
	}
	s.lastSeq, s.lastN, s.lastFlows, s.seqKnown = seq, n, flows, counted
}

// expire forgets the session's templates not refreshed since the timeout.
func (d *Decoder) expire(s *session, now time.Time) {
	if now.Before(s.expiry) {
		return // at most once a second: a template may outlive its timeout by 1 s
	}
	s.expiry = now.Add(time.Second)
	for id, t := range s.templates {
		if now.Sub(t.seen) > d.cfg.TemplateTimeout {
			delete(s.templates, id)
			d.live--
			d.stats.Expired++
		}
	}
}

func (d *Decoder) decodeIPFIX(from netip.AddrPort, msg []byte, emit func(*flow.Record)) (err error) {
	be := binary.BigEndian
	if len(msg) < headerLen {
		return d.fail(ErrShortHeader, "%d bytes", len(msg))
	}
	if n := int(be.Uint16(msg[2:])); n != len(msg) {
		return d.fail(ErrBadLength, "length field %d, message %d bytes", n, len(msg))
	}
	d.stats.Messages[2]++
	hdr := msgHeader{export: int64(be.Uint32(msg[4:])), version: Version}
	seq, domain := be.Uint32(msg[8:]), be.Uint32(msg[12:])
	s, err := d.session(sessionKey{from, domain, Version})
	if err != nil {
		return err
	}
	now := s.seen
	d.expire(s, now)
	flows, opts, unknown := d.stats.Records, d.stats.OptionsRecords, d.stats.Errors[ErrUnknownTemplate]
	defer func() {
		flows := uint32(d.stats.Records - flows)
		d.sequenceIPFIX(s, seq, flows+uint32(d.stats.OptionsRecords-opts), flows,
			err == nil && d.stats.Errors[ErrUnknownTemplate] == unknown)
	}()
	for p := headerLen; p < len(msg); {
		if p+4 > len(msg) {
			return d.fail(ErrBadSetLength, "set header at %d of %d", p, len(msg))
		}
		id, sl := be.Uint16(msg[p:]), int(be.Uint16(msg[p+2:]))
		if sl < 4 || p+sl > len(msg) {
			return d.fail(ErrBadSetLength, "set %d of %d bytes at %d of %d", id, sl, p, len(msg))
		}
		body := msg[p+4 : p+sl]
		p += sl
		switch {
		case id == 2 || id == 3:
			if err := d.templateSet(s, body, id == 3, false, now); err != nil {
				return err
			}
		case id >= 256:
			if err := d.dataSet(s, id, body, &hdr, emit); err != nil {
				return err
			}
		default: // sets 0, 1, 4..255 are reserved in IPFIX: skip
			d.stats.SkippedSets++
		}
	}
	return nil
}
