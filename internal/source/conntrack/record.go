package conntrack

import "github.com/weir-dev/weir/internal/flow"

// endReasons maps export reasons to the record's end reasons. A stale
// connection (no dump or event saw it for the stale timeout) is reported
// as idle: nothing is known of it after its last update.
var endReasons = [NumExportReasons]flow.EndReason{
	ExportActive:   flow.ReasonActive,
	ExportIdle:     flow.ReasonIdle,
	ExportEnd:      flow.ReasonEnd,
	ExportStale:    flow.ReasonIdle,
	ExportFull:     flow.ReasonFull,
	ExportShutdown: flow.ReasonShutdown,
}

// key returns t as a flow key: the original tuple is the initiator's
// view, which is the record's orientation.
func (t *Tuple) key() flow.Key {
	k := flow.Key{SrcAddr: t.Src, DstAddr: t.Dst, Proto: t.Proto, IPVersion: 4}
	if t.V6 {
		k.IPVersion = 6
	}
	switch t.Proto {
	case flow.ProtoICMP, flow.ProtoICMPv6:
		// The original tuple is the request's (conntrack keys a ping by
		// its echo request), as the packet decoder keys it.
		k.ICMPType, k.ICMPCode = t.ICMPType, t.ICMPCode
	default:
		k.SrcPort, k.DstPort = t.SrcPort, t.DstPort
	}
	return k
}

// Record writes x as a flow record into r: the original tuple is the key,
// the reply tuple (reversed) the post-NAT key when the two differ, the
// original direction's deltas are the initiator's counts and the reply
// direction's the responder's. Conntrack does not report TCP flags or
// interfaces: those fields stay zero.
func (x *Export) Record(r *flow.Record) {
	*r = flow.Record{
		Key:        x.Orig.key(),
		Packets:    x.DeltaOrig.Packets,
		Bytes:      x.DeltaOrig.Bytes,
		RevPackets: x.DeltaReply.Packets,
		RevBytes:   x.DeltaReply.Bytes,
		EndReason:  endReasons[x.Reason],
		Start:      x.Since.UnixNano(),
		End:        x.Last.UnixNano(),
		Mark:       x.Mark,
		Zone:       x.Zone,
	}
	if x.Reply.Proto == 0 {
		return // no reply tuple reported
	}
	// Under NAT the reply comes from the translated destination to the
	// translated source: reversed, it is the connection after NAT.
	post := x.Reply.key()
	post.SrcAddr, post.DstAddr = post.DstAddr, post.SrcAddr
	post.SrcPort, post.DstPort = post.DstPort, post.SrcPort
	post.ICMPType, post.ICMPCode = r.Key.ICMPType, r.Key.ICMPCode // a reply tuple holds the reply's type
	if post.SrcAddr != r.Key.SrcAddr || post.DstAddr != r.Key.DstAddr ||
		post.SrcPort != r.Key.SrcPort || post.DstPort != r.Key.DstPort {
		r.PostNAT = post
	}
}
