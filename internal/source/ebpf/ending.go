package ebpf

import (
	"bytes"

	"github.com/weir-dev/weir/internal/flow"
)

// ending applies the flow table's end rule (FIN both ways, or an RST:
// reason end) to the records of the final flush, which the table emits
// with reason shutdown whatever their state: a connection that finished
// inside the end linger, or whose last packets were still in the kernel
// map when the source stopped, ends with reason end, as it would have a
// linger later.
//
// A record's TCP flags cover only its own packets (the table clears them
// at each active record, keeping the flow's end state), so the FIN and
// RST flags of active records are remembered per flow until the flow's
// last record; flows the table drops without a record (an empty delta)
// are pruned after each expiry. The map holds only live TCP flows whose
// active records carried a FIN or an RST: bounded by the table's size.
type ending struct {
	seen map[flow.Key]uint8 // canonical key → endFin bits per canonical side, endRst
}

// End bits: a FIN from the canonical key's source (lo) or destination
// (hi) side, an RST from either.
const (
	endFinLo uint8 = 1 << iota
	endFinHi
	endRst
)

// note sees every record the table emits before it goes out: an active
// record's end flags are remembered; a shutdown record of a flow that
// ended is relabelled end; any other record is the flow's last.
func (e *ending) note(r *flow.Record) {
	if r.Key.Proto != flow.ProtoTCP {
		return
	}
	switch r.EndReason {
	case flow.ReasonActive:
		if (r.TCPFlags|r.RevTCPFlags)&(flow.TCPFin|flow.TCPRst) == 0 {
			return // the common case: nothing to remember
		}
		if e.seen == nil {
			e.seen = map[flow.Key]uint8{}
		}
		k, b := endFlags(r)
		e.seen[k] |= b
	case flow.ReasonShutdown:
		k, b := endFlags(r)
		if b |= e.seen[k]; b&endRst != 0 || b&(endFinLo|endFinHi) == endFinLo|endFinHi {
			r.EndReason = flow.ReasonEnd
		}
		delete(e.seen, k)
	default: // the flow's last record
		if len(e.seen) > 0 {
			k, _ := endFlags(r)
			delete(e.seen, k)
		}
	}
}

// prune forgets the flows the table no longer holds.
func (e *ending) prune(t *flow.Table) {
	for k := range e.seen {
		if !t.Contains(&k) {
			delete(e.seen, k)
		}
	}
}

// endFlags returns r's canonical key (the orientation with the lower
// source address and port, so that a flow whose initiator changes keeps
// one key) and its end bits on that key's sides.
func endFlags(r *flow.Record) (flow.Key, uint8) {
	k, fwd, rev := r.Key, r.TCPFlags, r.RevTCPFlags
	if c := bytes.Compare(k.SrcAddr[:], k.DstAddr[:]); c > 0 || c == 0 && k.SrcPort > k.DstPort {
		k, fwd, rev = k.Reverse(), rev, fwd
	}
	var b uint8
	if fwd&flow.TCPFin != 0 {
		b |= endFinLo
	}
	if rev&flow.TCPFin != 0 {
		b |= endFinHi
	}
	if (fwd|rev)&flow.TCPRst != 0 {
		b |= endRst
	}
	return k, b
}
