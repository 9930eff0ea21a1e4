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
	// message of their own when they are due. With the sampled templates
	// as well the templates alone may need more than one message: they
	// are split into sets that each fit one. An enriched record
	// (enterprise.go) has its strings cut to what is left of the MTU.
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
	// PEN is the Private Enterprise Number of the enterprise elements
	// that carry the workloads, service, rule, conntrack mark and zone
	// (enterprise.go); 0: they are not exported. Not ReversePEN.
	PEN uint32
	// Unidirectional sends each record as up to two data records, one
	// per direction, in templates without the reverse elements, for
	// collectors that ignore RFC 5103 (uni.go).
	Unidirectional bool
	// OneSet sends one set per message and one template per template
	// set, unpadded: what vmware/go-ipfix's collector reads (it decodes
	// only a message's first set, and a data set up to the message's
	// end). Messages get smaller and more numerous.
	OneSet bool
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
	nrec      uint32 // data records (flows) in the open message
	nflow     uint32 // flow records (flow.Record) in the open message: nrec, or up to half of it when Unidirectional
	seq       uint32 // data records (flows and options) sent before the open message
	nopt      uint32 // options data records in the open message (sequence numbers count them)
	flows     uint32 // flow records (flow.Record) of the message last handed to emit
	sinceTmpl int    // messages since templates were last sent
	lastTmpl  time.Time
	// tmpl is what goes out when templates are due, encoded once (again
	// on each announcement): the announced templates, and once sampled
	// records came, the sampling options (sampling.go); chunks split it
	// into parts that each fit in a message.
	tmpl        []byte
	chunks      []chunk
	pairs       uint32              // template pairs announced: bit p for ts[2p] and [2p+1]
	samplers    [maxSamplers]uint32 // sampling intervals announced (0: free slot)
	nextSampler int                 // the slot the next new interval takes
	lastN       uint32              // the interval last found announced (0: none)
	// ts are the templates: Templates, and with a PEN the enterprise
	// ones after them (index bit tEnt).
	ts    []Template
	fixed [2 * len(Templates)]int    // fixed-length part of each template's records
	ids   [2 * len(Templates)]uint16 // and its id
	es    [entStrings]string         // the enriched record's strings, fitted (enterprise.go)
	cut   uint64                     // strings cut to fit
	rev   flow.Record                // Unidirectional: the reverse direction's record (uni.go)
	// The node announced (node.go): as the records name it, and as sent
	// (cut); nodeSent once a node was announced (then "" is announced too).
	nodeRaw, node string
	nodeSent      bool
	// nodeDue: the next message starts with the node's options template
	// and record alone (nodeTmpl, cut into nodeChunks).
	nodeDue    bool
	nodeTmpl   []byte
	nodeChunks []chunk
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
	if cfg.PEN == ReversePEN {
		return nil, fmt.Errorf("%w: PEN %d is RFC 5103's, of the reverse elements", ErrBadConfig, cfg.PEN)
	}
	e := &Encoder{cfg: cfg, emit: emit, msg: make([]byte, 0, cfg.MTU), set: -1, pairs: 1, ts: Templates[:]}
	if cfg.PEN != 0 {
		e.ts = append(e.ts[:len(e.ts):len(e.ts)], enterpriseTemplates(cfg.PEN)...)
	}
	if cfg.Unidirectional {
		e.ts = uniTemplates(e.ts)
	}
	e.buildTemplates()
	for i := range e.ts {
		e.fixed[i], e.ids[i] = fixedLen(&e.ts[i]), e.ts[i].ID
	}
	return e, nil
}

// appendTemplate encodes t as a template record.
func appendTemplate(b []byte, t *Template) []byte {
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
	return b
}

// Reset starts a new transport session (a reconnected TCP or TLS
// stream): the open message, if any, is dropped, the sequence number
// restarts at 0 and the templates (the drop and sampled templates and the
// sampling options too, once announced) go out again in the next message.
// It returns the flow records dropped with the open message.
func (e *Encoder) Reset() (dropped uint32) {
	dropped = e.nflow
	e.open, e.set, e.nrec, e.nflow, e.nopt, e.seq = false, -1, 0, 0, 0, 0
	e.lastTmpl, e.sinceTmpl = time.Time{}, 0
	return dropped
}

// Sequence is the number of data records (flow records and options data,
// RFC 7011 3.1) sent so far, modulo 2^32: the next message's sequence
// number.
func (e *Encoder) Sequence() uint32 { return e.seq + e.nrec + e.nopt }

// Cut is the number of enterprise strings cut so that their record fits
// in a message (enterprise.go).
func (e *Encoder) Cut() uint64 { return e.cut }

// Flows is the number of flow records (flow.Record, whatever the number
// of data records they took) in the message last handed to emit, its
// options data records not counted: during emit, the records a failed
// send loses. A record sent as two data records (Unidirectional) counts
// with the message of its second.
func (e *Encoder) Flows() uint32 { return e.flows }

// Add encodes r into the open message, finishing it first when r would
// not fit. A record with drops uses a drop template, a record with
// Sampling > 1 a sampled one that names its interval, a translated or
// denied record a NAT or deny template (nat.go), with a PEN an enriched
// record an enterprise one (enterprise.go); the first record
// that needs a template pair or an interval not yet announced finishes
// the open message and announces them (announce). It allocates nothing
// (but for that, once each).
func (e *Encoder) Add(r *flow.Record) error {
	if r.Node != e.nodeRaw { // the node changed: say so before its records
		if err := e.setNode(r.Node); err != nil {
			return err
		}
	}
	ti := 0
	if r.Key.IPVersion == 6 {
		ti = 1
	}
	if r.DropPackets > 0 || r.Sampling > 1 || r.PostNAT.IPVersion != 0 || r.Verdict != flow.VerdictNone ||
		(e.cfg.PEN != 0 && enriched(r)) {
		var err error
		if ti, err = e.special(r, ti); err != nil {
			return err
		}
	}
	name := r.Iface
	if len(name) > maxName {
		name = name[:maxName]
	}
	fwd, rev := true, false
	if e.cfg.Unidirectional {
		rev = r.RevPackets > 0
		fwd = r.Packets > 0 || !rev
	}
	need := e.fixed[ti] + 1 + len(name)
	var es *[entStrings]string
	var budget int
	if ti >= tEnt {
		es = &e.es
		loadStrings(es, r)
		budget = e.room() - need
		cost, cut := fitStrings(es, budget)
		need += cost
		e.cut += uint64(cut)
	}
	// Both directions of a record go in one message when they fit in one
	// (Flows counts whole records).
	both := fwd && rev && 2*need <= e.room()
	if fwd {
		if err := e.reserve(ti, need, both); err != nil {
			return err
		}
		e.msg = appendRecord(e.msg, r, ti, name, es, !e.cfg.Unidirectional)
		e.nrec++
	}
	if rev {
		if !both {
			if err := e.reserve(ti, need, false); err != nil {
				return err
			}
		}
		e.reverse(r, fwd, es, budget)
		e.msg = appendRecord(e.msg, &e.rev, ti, name, es, false)
		e.nrec++
	}
	e.nflow++
	return nil
}

// room is what a data record may take: a message with its header and one
// set with its header and padding.
func (e *Encoder) room() int { return e.cfg.MTU - headerLen - setHeaderLen - 3 }

// pad is the padding that ends a set of n octets on a 4-octet boundary
// (RFC 7011 3.3.1: zero octets, fewer than the shortest record of the
// set: weir pads at most 3, its shortest record is a sampling options
// record of 14 octets, its shortest flow record 53; template sets are
// aligned already). OneSet messages are not padded.
func (e *Encoder) pad(n int) int {
	if e.cfg.OneSet {
		return 0
	}
	return -n & 3
}

// reserve makes room in the open message for a data record of need octets
// in template ti (two when both), finishing the message first when they
// would not fit (or, OneSet, when it holds another set), and opens the
// set.
func (e *Encoder) reserve(ti, need int, both bool) error {
	if both {
		need *= 2
	}
	if e.open && (e.after(ti, need) > e.cfg.MTU || (e.cfg.OneSet && len(e.msg) > headerLen && e.newSet(ti))) {
		if err := e.Flush(); err != nil {
			return err
		}
	}
	if !e.open {
		if err := e.start(need); err != nil {
			return err
		}
	}
	if e.newSet(ti) {
		e.closeSet()
		e.set, e.setID = len(e.msg), e.ids[ti]
		e.msg = binary.BigEndian.AppendUint16(e.msg, e.setID)
		e.msg = append(e.msg, 0, 0) // length, when the set closes
	}
	return nil
}

// newSet reports whether a record of template ti needs a set of its own.
func (e *Encoder) newSet(ti int) bool { return e.set < 0 || e.setID != e.ids[ti] }

// after is the open message's length once need more octets of template
// ti's records are added and their set is padded.
func (e *Encoder) after(ti, need int) int {
	n, set := len(e.msg), e.set
	if e.newSet(ti) {
		if set >= 0 {
			n += e.pad(n - set)
		}
		set = n
		n += setHeaderLen
	}
	n += need
	return n + e.pad(n-set)
}

// special is the template of a record with drops, sampling, NAT, a
// verdict or (with a PEN) enrichment (ti: 0 for IPv4, 1 for IPv6),
// announcing its pair and its interval if they are new.
func (e *Encoder) special(r *flow.Record, ti int) (int, error) {
	if e.cfg.PEN != 0 && enriched(r) {
		ti |= tEnt
	}
	if r.DropPackets > 0 {
		ti += tDrops
	}
	n := r.Sampling
	if n > 1 {
		ti += tSampled
	}
	ti |= natBits(r)
	if e.pairs&(1<<(ti>>1)) == 0 || (n > 1 && n != e.lastN && !e.sampler(n)) {
		return ti, e.announce(ti>>1, n)
	}
	return ti, nil
}

// start opens a message: the header (completed by Flush) and, when due,
// the templates. When the templates and the first record (need bytes and
// a set header) do not fit together (MinMTU), the templates are sent in a
// message of their own (or several: each chunk fits in one).
func (e *Encoder) start(need int) error {
	e.begin()
	now := e.cfg.Now()
	due := e.lastTmpl.IsZero() ||
		(e.cfg.RefreshMessages > 0 && e.sinceTmpl >= e.cfg.RefreshMessages) ||
		(e.cfg.RefreshInterval > 0 && now.Sub(e.lastTmpl) >= e.cfg.RefreshInterval)
	switch {
	case due:
		e.lastTmpl, e.sinceTmpl, e.nodeDue = now, 0, false
		return e.sendChunks(e.tmpl, e.chunks, need)
	case e.nodeDue: // only the node's name changed (node.go)
		e.nodeDue = false
		return e.sendChunks(e.nodeTmpl, e.nodeChunks, need)
	}
	return nil
}

// sendChunks puts the announcement tmpl (cut into chunks) in the open
// message, in as many messages as it takes, and leaves room for a first
// record of need bytes.
func (e *Encoder) sendChunks(tmpl []byte, chunks []chunk, need int) error {
	prev := 0
	for _, c := range chunks {
		if (e.cfg.OneSet || len(e.msg)+c.end-prev > e.cfg.MTU) && len(e.msg) > headerLen {
			if err := e.Flush(); err != nil {
				return err
			}
			e.begin()
		}
		e.msg = append(e.msg, tmpl[prev:c.end]...)
		e.nopt += c.opts
		prev = c.end
	}
	if n := setHeaderLen + need; e.cfg.OneSet || len(e.msg)+n+e.pad(n) > e.cfg.MTU {
		if err := e.Flush(); err != nil {
			return err
		}
		e.begin()
	}
	return nil
}

// begin opens an empty message: the header, completed by Flush.
func (e *Encoder) begin() {
	e.msg = append(e.msg[:0], make([]byte, headerLen)...)
	e.open, e.set, e.nrec, e.nflow, e.nopt = true, -1, 0, 0, 0
}

// closeSet pads the open set, if any, and writes its length.
func (e *Encoder) closeSet() {
	if e.set >= 0 {
		for range e.pad(len(e.msg) - e.set) {
			e.msg = append(e.msg, 0)
		}
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
	e.seq += e.nrec + e.nopt
	e.flows = e.nflow
	e.open, e.nrec, e.nflow, e.nopt = false, 0, 0, 0
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
// fields at constant offsets (the reverse counters and flags only when bi,
// uni.go), with drops the drop fields, when sampled the
// selectorId (the interval), when translated or denied the NAT and deny
// fields (nat.go), when enriched the enterprise integers, then the
// interface name, and when enriched the enterprise strings es
// (enterprise.go).
func appendRecord(b []byte, r *flow.Record, ti int, name string, es *[entStrings]string, bi bool) []byte {
	be := binary.BigEndian
	b = be.AppendUint64(b, uint64(r.Start/int64(time.Millisecond)))
	b = be.AppendUint64(b, uint64(r.End/int64(time.Millisecond)))
	b = be.AppendUint64(b, r.Bytes)
	b = be.AppendUint64(b, r.Packets)
	if bi {
		b = be.AppendUint64(b, r.RevBytes)
		b = be.AppendUint64(b, r.RevPackets)
	}
	if ti&tIPv6 != 0 {
		b = append(b, r.Key.SrcAddr[:]...)
		b = append(b, r.Key.DstAddr[:]...)
	} else {
		b = append(b, r.Key.SrcAddr[12:]...)
		b = append(b, r.Key.DstAddr[12:]...)
	}
	var icmp uint16
	if r.Key.Proto == flow.ProtoICMP || r.Key.Proto == flow.ProtoICMPv6 {
		icmp = uint16(r.Key.ICMPType)<<8 | uint16(r.Key.ICMPCode)
	}
	b = be.AppendUint16(b, icmp) // before the ports (icmpFirst, template.go)
	b = be.AppendUint16(b, r.Key.SrcPort)
	b = be.AppendUint16(b, r.Key.DstPort)
	b = be.AppendUint16(b, uint16(r.TCPFlags))
	if bi {
		b = be.AppendUint16(b, uint16(r.RevTCPFlags))
	}
	b = be.AppendUint16(b, r.VLAN)
	reason := uint8(4)
	if int(r.EndReason) < len(endReason) {
		reason = endReason[r.EndReason]
	}
	b = append(b, r.Key.Proto, reason)
	if ti&tDrops != 0 {
		b = be.AppendUint64(b, r.DropBytes)
		b = be.AppendUint64(b, r.DropPackets)
		b = append(b, dropStatus(r.DropReason))
	}
	if ti&tSampled != 0 {
		b = be.AppendUint32(b, r.Sampling)
	}
	if ti >= tNAT {
		if ti&(tNAT|tDeny) != 0 {
			b = appendNAT(b, r, ti)
		}
		if ti&tEnt != 0 {
			b = appendEntFixed(b, r)
		}
	}
	b = append(b, byte(len(name)))
	b = append(b, name...)
	if ti >= tEnt {
		b = appendEntStrings(b, es)
	}
	return b
}
