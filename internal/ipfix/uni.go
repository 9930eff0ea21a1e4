package ipfix

import "github.com/weir-dev/weir/internal/flow"

// Unidirectional export (Config.Unidirectional; the export URL's
// ?biflow=off). GoFlow2 and pmacct's nfacctd ignore RFC 5103's reverse
// elements, so a biflow's responder traffic is lost on them. With
// Unidirectional a record goes out as two data records in templates
// without the reverse elements (the same template ids, each its
// biflow template less reverse octetDeltaCount, packetDeltaCount and
// tcpControlBits):
//
//   - forward: the key as it is, Packets, Bytes and TCPFlags;
//   - reverse: the key swapped (addresses, ports, the post-NAT key and
//     the workloads; an ICMP request type becomes its reply's: echo 8 → 0,
//     timestamp 13 → 14, information 15 → 16, address mask 17 → 18,
//     ICMPv6 echo 128 → 129; other types stay), RevPackets, RevBytes and
//     RevTCPFlags.
//
// A direction with no packets is not sent (a record with none either way
// sends its forward record). Both carry the record's start and end times,
// end reason, VLAN, interface, sampling, verdict and enterprise fields; the
// drop counters, which count the flow's drops in both directions, travel
// with the first of the two only (the other's are 0). Both go in one
// message whenever they fit in one, so a lost message loses whole flows.

// uniTemplates are ts without the reverse elements.
func uniTemplates(ts []Template) []Template {
	out := make([]Template, len(ts))
	for i, t := range ts {
		fs := make([]Field, 0, len(t.Fields))
		for _, f := range t.Fields {
			if f.PEN != ReversePEN {
				fs = append(fs, f)
			}
		}
		out[i] = Template{ID: t.ID, Fields: fs}
	}
	return out
}

// icmpReply maps an ICMP (v4) request type to its reply's.
var icmpReply = [256]uint8{8: 0, 13: 14, 15: 16, 17: 18}

// reverse fills e.rev with r's reverse direction (see above); with fwd the
// forward record went first and carried the drops. With es (an enriched
// record) it loads the reverse's strings and fits them to budget, as Add
// did the forward's: the same strings swapped, so they cost the same.
func (e *Encoder) reverse(r *flow.Record, fwd bool, es *[entStrings]string, budget int) {
	v := &e.rev
	*v = *r
	k := &v.Key
	k.SrcAddr, k.DstAddr, k.SrcPort, k.DstPort = r.Key.DstAddr, r.Key.SrcAddr, r.Key.DstPort, r.Key.SrcPort
	switch k.Proto {
	case flow.ProtoICMP:
		if t := k.ICMPType; t == 8 || t == 13 || t == 15 || t == 17 {
			k.ICMPType = icmpReply[t]
		}
	case flow.ProtoICMPv6:
		if k.ICMPType == 128 {
			k.ICMPType = 129
		}
	}
	p := &v.PostNAT
	p.SrcAddr, p.DstAddr, p.SrcPort, p.DstPort = r.PostNAT.DstAddr, r.PostNAT.SrcAddr, r.PostNAT.DstPort, r.PostNAT.SrcPort
	v.SrcWorkload, v.DstWorkload = r.DstWorkload, r.SrcWorkload
	v.Packets, v.Bytes, v.TCPFlags = r.RevPackets, r.RevBytes, r.RevTCPFlags
	v.RevPackets, v.RevBytes, v.RevTCPFlags = 0, 0, 0
	if fwd {
		v.DropPackets, v.DropBytes = 0, 0
	}
	if es != nil {
		loadStrings(es, v)
		fitStrings(es, budget)
	}
}
