package ipfix

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// Defaults and bounds of Config.
const (
	// DefaultMTU keeps a message, with IPv6 and UDP headers, inside a
	// 1500-byte Ethernet frame.
	DefaultMTU = 1400
	// MinMTU (the smallest datagram every IPv4 host accepts) fits the
	// header, the two plain templates and one IPv6 record with the
	// longest name (541 bytes). With the drop templates announced too, a
	// message needs 750 bytes for that: below, the templates go in a
	// message of their own when they are due.
	MinMTU = 576
	// MaxMTU is the largest IPFIX message (its length field is 16 bits).
	MaxMTU = 65535
	// DefaultRefreshMessages and DefaultRefreshInterval: templates are
	// sent again after this many messages or this long (RFC 7011 10.3.6:
	// UDP collectors may have lost or expired them).
	DefaultRefreshMessages = 100
	DefaultRefreshInterval = time.Minute
	// maxName bounds the interface name in a record (RFC 7011 7: a
	// variable-length field of 255 octets or more takes 3 length octets).
	maxName = 255 - 1
)

const (
	headerLen    = 16
	setHeaderLen = 4
	templateSet  = 2
)

// Config configures an Encoder.
type Config struct {
	Domain          uint32        // observation domain id
	MTU             int           // largest message in bytes (default DefaultMTU)
	RefreshMessages int           // resend templates after this many messages (default 100; <0: never)
	RefreshInterval time.Duration // resend templates after this long (default 1m; <0: never)
	Now             func() time.Time
}

// Encoder builds IPFIX messages from flow records. It is not safe for
// concurrent use.
type Encoder struct {
	cfg       Config
	emit      func(msg []byte) error
	msg       []byte
	open      bool   // a message is being built
	set       int    // offset of the open data set's header, or -1
	setID     uint16 // its template id
	nrec      uint32 // data records in the open message
	seq       uint32 // data records sent before the open message
	sinceTmpl int    // messages since templates were last sent
	lastTmpl  time.Time
	tmpl      []byte              // the template set, encoded once (again when drops is set)
	drops     bool                // the drop templates are announced: tmpl holds all four
	fixed     [len(Templates)]int // fixed-length part of each template's records
}

// ErrBadConfig is wrapped by NewEncoder's configuration errors.
var ErrBadConfig = errors.New("ipfix: bad configuration")

// NewEncoder returns an Encoder that hands each finished message to emit.
// The slice is only valid during the call.
func NewEncoder(cfg Config, emit func(msg []byte) error) (*Encoder, error) {
	if cfg.MTU == 0 {
		cfg.MTU = DefaultMTU
	}
	if cfg.MTU < MinMTU || cfg.MTU > MaxMTU {
		return nil, fmt.Errorf("%w: MTU %d out of range %d..%d", ErrBadConfig, cfg.MTU, MinMTU, MaxMTU)
	}
	if cfg.RefreshMessages == 0 {
		cfg.RefreshMessages = DefaultRefreshMessages
	}
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	e := &Encoder{cfg: cfg, emit: emit, msg: make([]byte, 0, cfg.MTU), set: -1}
	e.tmpl = appendTemplateSet(nil, Templates[:2])
	for i := range Templates {
		e.fixed[i] = fixedLen(&Templates[i])
	}
	return e, nil
}

// appendTemplateSet encodes templates as one template set.
func appendTemplateSet(b []byte, ts []Template) []byte {
	start := len(b)
	b = binary.BigEndian.AppendUint16(b, templateSet)
	b = binary.BigEndian.AppendUint16(b, 0) // length, below
	for _, t := range ts {
		b = binary.BigEndian.AppendUint16(b, t.ID)
		b = binary.BigEndian.AppendUint16(b, uint16(len(t.Fields)))
		for _, f := range t.Fields {
			id := f.ID
			if f.PEN != 0 {
				id |= 0x8000 // enterprise bit
			}
			b = binary.BigEndian.AppendUint16(b, id)
			b = binary.BigEndian.AppendUint16(b, f.Length)
			if f.PEN != 0 {
				b = binary.BigEndian.AppendUint32(b, f.PEN)
			}
		}
	}
	binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	return b
}

// Reset starts a new transport session (a reconnected TCP or TLS
// stream): the open message, if any, is dropped, the sequence number
// restarts at 0 and the templates (the drop templates too, once
// announced) go out again in the next message. It returns the records
// dropped with the open message.
func (e *Encoder) Reset() (dropped uint32) {
	dropped = e.nrec
	e.open, e.set, e.nrec, e.seq = false, -1, 0, 0
	e.lastTmpl, e.sinceTmpl = time.Time{}, 0
	return dropped
}

// Sequence is the number of data records sent so far (modulo 2^32): the
// next message's sequence number.
func (e *Encoder) Sequence() uint32 { return e.seq + e.nrec }

// Add encodes r into the open message, finishing it first when r would
// not fit. A record with drops uses a drop template; the first one
// finishes the open message and announces them (announceDrops). It
// allocates nothing (but for that once).
func (e *Encoder) Add(r *flow.Record) error {
	ti := 0
	if r.Key.IPVersion == 6 {
		ti = 1
	}
	if r.DropPackets > 0 {
		ti += 2
		if !e.drops {
			if err := e.announceDrops(); err != nil {
				return err
			}
		}
	}
	name := r.Iface
	if len(name) > maxName {
		name = name[:maxName]
	}
	need := e.fixed[ti] + 1 + len(name)
	if e.open && (e.setID != Templates[ti].ID || e.set < 0) {
		need += setHeaderLen
	}
	if e.open && len(e.msg)+need > e.cfg.MTU {
		if err := e.Flush(); err != nil {
			return err
		}
	}
	if !e.open {
		if err := e.start(need); err != nil {
			return err
		}
	}
	if e.set < 0 || e.setID != Templates[ti].ID {
		e.closeSet()
		e.set, e.setID = len(e.msg), Templates[ti].ID
		e.msg = binary.BigEndian.AppendUint16(e.msg, e.setID)
		e.msg = append(e.msg, 0, 0) // length, when the set closes
	}
	e.msg = appendRecord(e.msg, r, ti&1 == 1, ti >= 2, name)
	e.nrec++
	return nil
}

// start opens a message: the header (completed by Flush) and, when due,
// the templates. When the templates and the first record (need bytes and
// a set header) do not fit together (MinMTU), the templates are sent in a
// message of their own.
func (e *Encoder) start(need int) error {
	e.msg = append(e.msg[:0], make([]byte, headerLen)...)
	e.open, e.set, e.nrec = true, -1, 0
	now := e.cfg.Now()
	due := e.lastTmpl.IsZero() ||
		(e.cfg.RefreshMessages > 0 && e.sinceTmpl >= e.cfg.RefreshMessages) ||
		(e.cfg.RefreshInterval > 0 && now.Sub(e.lastTmpl) >= e.cfg.RefreshInterval)
	if due {
		e.msg = append(e.msg, e.tmpl...)
		e.lastTmpl, e.sinceTmpl = now, 0
		if len(e.msg)+setHeaderLen+need > e.cfg.MTU {
			if err := e.Flush(); err != nil {
				return err
			}
			e.msg = append(e.msg[:0], make([]byte, headerLen)...)
			e.open, e.set, e.nrec = true, -1, 0
		}
	}
	return nil
}

// announceDrops adds the drop templates to the template set, for the
// first record with drops: the open message is finished (a collector must
// learn a template before its records) and the next carries all four
// templates, as every refresh does from then on.
func (e *Encoder) announceDrops() error {
	e.drops = true
	e.tmpl = appendTemplateSet(e.tmpl[:0], Templates[:])
	e.lastTmpl = time.Time{} // due
	return e.Flush()
}

func (e *Encoder) closeSet() {
	if e.set >= 0 {
		binary.BigEndian.PutUint16(e.msg[e.set+2:], uint16(len(e.msg)-e.set))
		e.set = -1
	}
}

// Flush finishes the open message, if any, and hands it to emit.
func (e *Encoder) Flush() error {
	if !e.open {
		return nil
	}
	e.closeSet()
	b := e.msg
	binary.BigEndian.PutUint16(b[0:], Version)
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	binary.BigEndian.PutUint32(b[4:], uint32(e.cfg.Now().Unix()))
	binary.BigEndian.PutUint32(b[8:], e.seq)
	binary.BigEndian.PutUint32(b[12:], e.cfg.Domain)
	e.seq += e.nrec
	e.open, e.nrec = false, 0
	e.sinceTmpl++
	return e.emit(b)
}

// endReason maps weir's end reasons to IPFIX flowEndReason (RFC 7011 /
// IANA): idle 1, active 2, end of flow 3, forced end 4, lack of resources 5.
var endReason = [flow.NumReasons]uint8{
	flow.ReasonNone: 4, flow.ReasonIdle: 1, flow.ReasonActive: 2, flow.ReasonEnd: 3,
	flow.ReasonFull: 5, flow.ReasonEOF: 4, flow.ReasonShutdown: 4,
}

// appendRecord writes r in the template's layout (template.go): fixed
// fields at constant offsets, with drops the drop fields, then the
// interface name.
func appendRecord(b []byte, r *flow.Record, v6, drops bool, name string) []byte {
	be := binary.BigEndian
	b = be.AppendUint64(b, uint64(r.Start/int64(time.Millisecond)))
	b = be.AppendUint64(b, uint64(r.End/int64(time.Millisecond)))
	b = be.AppendUint64(b, r.Bytes)
	b = be.AppendUint64(b, r.Packets)
	b = be.AppendUint64(b, r.RevBytes)
	b = be.AppendUint64(b, r.RevPackets)
	if v6 {
		b = append(b, r.Key.SrcAddr[:]...)
		b = append(b, r.Key.DstAddr[:]...)
	} else {
		b = append(b, r.Key.SrcAddr[12:]...)
		b = append(b, r.Key.DstAddr[12:]...)
	}
	b = be.AppendUint16(b, r.Key.SrcPort)
	b = be.AppendUint16(b, r.Key.DstPort)
	var icmp uint16
	if r.Key.Proto == flow.ProtoICMP || r.Key.Proto == flow.ProtoICMPv6 {
		icmp = uint16(r.Key.ICMPType)<<8 | uint16(r.Key.ICMPCode)
	}
	b = be.AppendUint16(b, icmp)
	b = be.AppendUint16(b, uint16(r.TCPFlags))
	b = be.AppendUint16(b, uint16(r.RevTCPFlags))
	b = be.AppendUint16(b, r.VLAN)
	reason := uint8(4)
	if int(r.EndReason) < len(endReason) {
		reason = endReason[r.EndReason]
	}
	b = append(b, r.Key.Proto, reason)
	if drops {
		b = be.AppendUint64(b, r.DropBytes)
		b = be.AppendUint64(b, r.DropPackets)
		b = append(b, dropStatus(r.DropReason))
	}
	b = append(b, byte(len(name)))
	return append(b, name...)
}
