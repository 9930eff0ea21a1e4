package nflog

import (
	"strings"

	"github.com/weir-dev/weir/internal/flow"
)

// endReasons maps deny-flow end reasons to the record's.
var endReasons = [...]flow.EndReason{
	EndIdle:    flow.ReasonIdle,
	EndEvicted: flow.ReasonFull,
	EndFlush:   flow.ReasonShutdown,
	EndActive:  flow.ReasonActive,
}

// Record writes d as a flow record into r: the key in the dropped
// packets' orientation (Src sent them), their packets and IP bytes,
// verdict deny, the log prefix as the rule (trailing spaces, which
// rules add for syslog, removed) and the packet mark. iface names the
// interface, if known.
func (d *DenyFlow) Record(r *flow.Record, iface string) {
	*r = flow.Record{
		Key:     d.Key,
		Packets: d.Packets,
		Bytes:   d.Bytes,
		Start:   d.First,
		End:     d.Last,
		Iface:   iface,
		Verdict: flow.VerdictDeny,
		Rule:    strings.TrimRight(d.Prefix, " "), // a substring of the interned prefix: no allocation
		Mark:    d.Mark,
	}
	if int(d.End) < len(endReasons) {
		r.EndReason = endReasons[d.End]
	}
}
