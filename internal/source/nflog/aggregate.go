package nflog

import (
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
)

// AggregatorConfig sizes an Aggregator.
type AggregatorConfig struct {
	MaxFlows    int   // deny flows held at most (DefaultMaxFlows if 0)
	IdleTimeout int64 // ns without packets before a deny flow is exported (DefaultIdleTimeout if 0)
}

// Defaults of AggregatorConfig.
const (
	DefaultMaxFlows    = 65536
	DefaultIdleTimeout = int64(15e9) // 15 s, like Antrea's idle flow timeout for deny connections
)

// AggregatorStats are an Aggregator's counters.
type AggregatorStats struct {
	Messages  uint64             // NFLOG packet messages handed to Message
	Packets   uint64             // packets counted into deny flows
	Errors    [NumReasons]uint64 // messages rejected, per Reason
	SeqGaps   uint64             // messages the kernel numbered but never delivered (NFULNL_CFG_F_SEQ)
	PrefixCut uint64             // log prefixes longer than MaxPrefixLen, cut to it
}

// Aggregator turns NFLOG messages into deny flows: decode the message,
// decode its payload to a flow key and IP length with internal/packet,
// intern the prefix, and count the packet in a DenyTable. It does not
// allocate per message once a prefix has been seen. Not safe for
// concurrent use.
type Aggregator struct {
	Stats    AggregatorStats
	Prefixes Prefixes
	Table    *DenyTable

	pdec    *packet.Decoder
	p       Packet
	fp      flow.Packet
	key     DenyKey
	seqNext uint32
	seqSeen bool
}

// NewAggregator returns an Aggregator exporting deny flows to emit (the
// DenyFlow is reused after emit returns).
func NewAggregator(cfg AggregatorConfig, emit func(*DenyFlow)) *Aggregator {
	a := &Aggregator{pdec: packet.NewDecoder(packet.Config{})}
	max := cfg.MaxFlows
	if max <= 0 {
		max = DefaultMaxFlows
	}
	idle := cfg.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	a.Table = NewDenyTable(max, idle, &a.Prefixes, emit)
	return a
}

// Message counts one netlink message (nlmsghdr included). now (Unix ns)
// is the packet's time when the kernel sent no NFULA_TIMESTAMP. Rejected
// messages are counted in Stats.Errors and returned as a sentinel error.
func (a *Aggregator) Message(msg []byte, now int64) error {
	a.Stats.Messages++
	r, cut := decode(&a.p, msg)
	if cut {
		a.Stats.PrefixCut++
	}
	if r != ReasonNone {
		a.Stats.Errors[r]++
		return errFor(r)
	}
	p := &a.p
	if p.Has&HasSeq != 0 {
		if gap := p.Seq - a.seqNext; a.seqSeen && gap != 0 && gap < 1<<31 {
			a.Stats.SeqGaps += uint64(gap) // a backwards step (a rebound group) is no loss
		}
		a.seqNext, a.seqSeen = p.Seq+1, true
	}
	if p.Time != 0 {
		now = p.Time
	}
	a.fp.Time = now
	// wireLen 0: the copy range cut the payload, and the IP header's own
	// length is what counts.
	if !a.pdec.Decode(packet.LinkRaw, p.Payload, 0, &a.fp) {
		a.Stats.Errors[ReasonBadPayload]++
		return ErrPayload
	}
	a.key = DenyKey{Flow: a.fp.Key, Prefix: a.Prefixes.ID(p.Prefix), Group: p.Group}
	a.Table.Add(&a.key, a.fp.Length, now, p)
	a.Stats.Packets++
	return nil
}

// Expire exports the deny flows idle at now (Unix ns).
func (a *Aggregator) Expire(now int64) int { return a.Table.Expire(now) }

// Flush exports every deny flow.
func (a *Aggregator) Flush() { a.Table.Flush() }
