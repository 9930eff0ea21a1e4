package ipfix

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// Defaults and bounds of DecoderConfig.
const (
	// DefaultTemplateTimeout: a template not refreshed for this long is
	// forgotten (RFC 7011 8.4 leaves the lifetime to the collector; several
	// refresh intervals of common exporters).
	DefaultTemplateTimeout = 30 * time.Minute
	// DefaultDatalessTimeout: a UDP session that sent no flow record for
	// this long after it began is forgotten, with its templates (a real
	// exporter sends data within seconds; a flood of templates does not).
	DefaultDatalessTimeout = 3 * time.Minute
	DefaultMaxSessions     = 4096 // exporter and domain pairs per decoder
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
	// DatalessTimeout forgets a session that sent no flow record for this
	// long after it began (default DefaultDatalessTimeout; negative:
	// never).
	DatalessTimeout time.Duration
	// Stream: the messages come over one TCP or TLS connection, whose
	// templates and sessions live as long as it (RFC 7011 8): nothing
	// expires.
	Stream       bool
	MaxSessions  int // per decoder; default DefaultMaxSessions
	MaxTemplates int // per session; default DefaultMaxTemplates
	// Budget bounds the template state this decoder holds together with
	// the others that share it, and per exporter address; nil: a budget
	// of the decoder's own, with the defaults.
	Budget *Budget
	// MaxClockSkew, when positive, gives records whose times lie further
	// than this from the receive time (or that have none) the receive
	// time, keeping their duration when it is from 0 to MaxClockSkew;
	// counted in DecodeStats.ClockSkew and NoTime. 0 keeps times as sent.
	MaxClockSkew time.Duration
	Now          func() time.Time
	// OnGap, if set, is called for each message whose sequence number
	// was not the expected one, with the session's exporter and
	// observation domain and what the jump says was lost (nothing for a
	// late message or a reset), from the goroutine calling Decode (gaps
	// are rare: this is how they are told apart by exporter).
	OnGap func(exporter netip.AddrPort, domain uint32, lost Loss)
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
	ErrExporterLimit                         // the exporter is over its limits (ExporterLimits) and has no other session to give up
	ErrTemplateBudget                        // the Budget is full: the session, template or string was refused
	numDecodeErrors
)

// NumDecodeErrors is the number of DecodeError values.
const NumDecodeErrors = int(numDecodeErrors)

var decodeErrorNames = [numDecodeErrors]string{"short_header", "bad_version", "bad_length", "bad_set_length",
	"unknown_template", "bad_template", "too_many_templates", "too_many_sessions", "bad_field_length", "bad_count",
	"too_many_selectors", "unknown_selector", "bad_enterprise_field", "exporter_limit", "template_budget"}

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
	SessionsLive   uint64    // sessions held now
	StateBytes     uint64    // bytes of template state held now (charged to the Budget)
	// SequenceGaps counts messages whose sequence number was not the
	// expected one: a loss, a late (or repeated) message or a reset.
	SequenceGaps uint64
	// LostRecords are the data records the sequence numbers of IPFIX and
	// NetFlow v5 say were lost; NetFlow v9 numbers export packets, so its
	// losses are LostPackets. A jump of more than 2^24 is a reset
	// (SeqResets: the exporter restarted), not a loss.
	LostRecords, LostPackets uint64
	// SeqReorders counts messages that came late (their number was
	// behind the expected one, within 2^24); LateRecords their records,
	// which the jump ahead before them counted as lost.
	SeqReorders, LateRecords, SeqResets uint64
	SkippedSets                         uint64 // data sets skipped (unknown template)
	// InternFull counts the times a session's table of interned
	// enterprise values (workloads, services, rules) was full and was
	// emptied to take a new one.
	InternFull uint64
	// ClockSkew counts records whose times lay further than
	// DecoderConfig.MaxClockSkew from the receive time, NoTime those
	// without a time: both got the receive time.
	ClockSkew, NoTime uint64
	// NamesSanitised counts interface names (distinct per session) that
	// were not printable UTF-8 of at most 64 bytes: invalid bytes and
	// unprintable runes were replaced, the name cut. NamesRefused counts
	// records whose name could not be interned (the session's 256 names,
	// the exporter's or the budget's bounds): they carry flow.OtherIface.
	NamesSanitised, NamesRefused uint64
	// NodesSanitised counts node names (observationDomainName) that
	// were not printable UTF-8 of at most MaxNodeName bytes: replaced
	// and cut likewise.
	NodesSanitised uint64
	Evicted        [NumEvictReasons]uint64 // sessions forgotten, by reason
	Errors         [NumDecodeErrors]uint64
}

// Add adds o's counters to s (the gauges too: live templates, sessions
// and bytes of several decoders add up).
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
	s.SessionsLive += o.SessionsLive
	s.StateBytes += o.StateBytes
	s.SequenceGaps += o.SequenceGaps
	s.LostRecords += o.LostRecords
	s.LostPackets += o.LostPackets
	s.SeqReorders += o.SeqReorders
	s.LateRecords += o.LateRecords
	s.SeqResets += o.SeqResets
	s.SkippedSets += o.SkippedSets
	s.InternFull += o.InternFull
	s.ClockSkew += o.ClockSkew
	s.NoTime += o.NoTime
	s.NamesSanitised += o.NamesSanitised
	s.NamesRefused += o.NamesRefused
	s.NodesSanitised += o.NodesSanitised
	for i := range s.Evicted {
		s.Evicted[i] += o.Evicted[i]
	}
	for i := range s.Errors {
		s.Errors[i] += o.Errors[i]
	}
}

// Decoder decodes IPFIX, NetFlow v9 and v5 messages into flow records. It
// is not safe for concurrent use: give each socket or connection its own.
// (Its mutex is for decoders sharing a Budget, which may evict each
// other's sessions when it is full: dfair.go.)
type Decoder struct {
	mu        sync.Mutex  // held by Decode, Sweep, Forget, Close; TryLock by other decoders
	owes      atomic.Bool // the budget holds debts of this decoder (dfair.go)
	decoding  bool        // inside Decode (read and written by its caller only)
	cfg       DecoderConfig
	budget    *Budget
	sessions  map[sessionKey]*session
	exporters map[netip.Addr]*exporterList // sessions by exporter address, for eviction
	stats     DecodeStats
	rec       flow.Record
	live      int      // templates held
	ops       []op     // scratch for compiling templates
	last      *session // the last message's session: exporters send in runs
	lastKey   sessionKey
	cur       *session // the session of the message being decoded: never evicted
	nextSweep time.Time
	// entS are the workload and service strings of the record being
	// decoded (dent.go), entKeyBuf the scratch of their interning key.
	entS      [9][]byte
	entKeyBuf []byte
	nameBuf   []byte // scratch of a sanitised interface name
}

// NewDecoder returns a Decoder.
func NewDecoder(cfg DecoderConfig) *Decoder {
	if cfg.TemplateTimeout <= 0 {
		cfg.TemplateTimeout = DefaultTemplateTimeout
	}
	if cfg.DatalessTimeout == 0 {
		cfg.DatalessTimeout = DefaultDatalessTimeout
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
	b := cfg.Budget
	if b == nil {
		b = NewBudget(0, ExporterLimits{})
	}
	return &Decoder{cfg: cfg, budget: b, sessions: map[sessionKey]*session{}, exporters: map[netip.Addr]*exporterList{}}
}

// Stats returns the counters. Like every method, call it from the
// goroutine that calls Decode (an emit callback may).
func (d *Decoder) Stats() DecodeStats {
	if !d.decoding {
		d.mu.Lock()
		defer d.unlock()
	}
	s := d.stats
	s.TemplatesLive, s.SessionsLive = uint64(d.live), uint64(len(d.sessions))
	for _, x := range d.sessions {
		s.StateBytes += uint64(x.cost)
	}
	return s
}

// Sampling returns the 1-in-N packet sampling interval an exporter's
// options data without a selector (or NetFlow v5 header) announced for
// domain, or 0. Decoded records carry their own in flow.Record.Sampling.
func (d *Decoder) Sampling(exporter netip.AddrPort, domain uint32) uint32 {
	if !d.decoding {
		d.mu.Lock()
		defer d.unlock()
	}
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

// Decode decodes one message received from exporter and calls emit for
// each flow record; the record is reused after emit returns. Records
// emitted before an error stay emitted. Every error is counted by reason
// and wraps ErrDecode.
func (d *Decoder) Decode(exporter netip.AddrPort, msg []byte, emit func(*flow.Record)) error {
	d.mu.Lock()
	d.decoding = true
	defer func() {
		d.decoding = false
		d.unlock()
	}()
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
	d.cur = s
	now := s.seen
	d.expire(s, now)
	flows, opts, unknown := d.stats.Records, d.stats.OptionsRecords, d.stats.Errors[ErrUnknownTemplate]
	defer func() {
		d.cur = nil
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
			if err := d.dataSet(s, id, body, &hdr, now, emit); err != nil {
				return err
			}
		default: // sets 0, 1, 4..255 are reserved in IPFIX: skip
			d.stats.SkippedSets++
		}
	}
	return nil
}
