package ipfix

import (
	"encoding/binary"
	"unicode/utf8"
)

// The node on the wire. flow.Record.Node (where the record was observed)
// travels as IANA's observationDomainName (300), the name of the
// observation domain the message header's observationDomainId numbers:
// an options record of NodeOptions (scope observationDomainId, then the
// name), announced when an Encoder's records name a node and again
// whenever their node changes (the open message is finished first, so a
// collector applies each name to the records after it; the next message
// starts with the options template and record alone, not every
// template), and with every template refresh. A record's node costs nothing per record on the wire.
// The Decoder reads observationDomainName both ways: from options data as
// the name of every later record of that session that names no node
// itself, and from a data record as that record's node.

// IEObservationDomainName is IANA's observationDomainName (string).
const IEObservationDomainName = 300

// TemplateNode is the options template id of the node's name: after the
// enterprise templates' 289–320.
const TemplateNode = 321

// NodeOptions is the options template of the observation domain's name.
// Its first field is the scope.
var NodeOptions = Template{ID: TemplateNode, Fields: []Field{
	{ID: IEObservationDomainID, Length: 4},
	{ID: IEObservationDomainName, Length: Variable},
}}

// MaxNodeName bounds a node name in IPFIX, in bytes, sent and received: a
// one-octet variable length (RFC 7011 7), enough for any DNS name (253).
// A longer name is cut at a rune start.
const MaxNodeName = 254

// setNode makes n the node announced from the next message on: the open
// message is finished (its records are of the node announced before).
func (e *Encoder) setNode(n string) error {
	e.nodeRaw, e.nodeSent = n, true
	e.node, _ = clipRunes(n, MaxNodeName)
	e.buildTemplates() // refreshes carry the new name
	e.nodeTmpl, e.nodeChunks = e.appendNodeOptions(e.nodeTmpl[:0], e.nodeChunks[:0])
	e.nodeDue = true
	return e.Flush()
}

// appendNodeOptions appends the options template of the node's name and
// its options data record (one chunk each) to b.
func (e *Encoder) appendNodeOptions(b []byte, cs []chunk) ([]byte, []chunk) {
	be := binary.BigEndian
	l := setHeaderLen + 6 + 4*len(NodeOptions.Fields)
	b = be.AppendUint16(b, optionsTemplateSet)
	b = be.AppendUint16(b, uint16(l+e.pad(l)))
	b = be.AppendUint16(b, NodeOptions.ID)
	b = be.AppendUint16(b, uint16(len(NodeOptions.Fields)))
	b = be.AppendUint16(b, 1) // scope: observationDomainId
	for _, f := range NodeOptions.Fields {
		b = be.AppendUint16(b, f.ID)
		b = be.AppendUint16(b, f.Length)
	}
	b = appendZeros(b, e.pad(l))
	cs = append(cs, chunk{end: len(b)})
	l = setHeaderLen + 4 + 1 + len(e.node)
	b = be.AppendUint16(b, TemplateNode)
	b = be.AppendUint16(b, uint16(l+e.pad(l)))
	b = be.AppendUint32(b, e.cfg.Domain)
	b = append(b, byte(len(e.node)))
	b = append(b, e.node...)
	b = appendZeros(b, e.pad(l))
	return b, append(cs, chunk{end: len(b), opts: 1})
}

// clipRunes cuts s to at most max bytes at a rune start.
func clipRunes(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

// nodeName interns the node name b of session s, sanitised as interface
// names are (printable UTF-8) and cut to MaxNodeName bytes; a name the
// session's budget cannot hold is passed on without being kept.
func (d *Decoder) nodeName(s *session, b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if string(b) == s.lastNodeRaw {
		return s.lastNode
	}
	var changed bool
	d.nameBuf, changed = sanitise(d.nameBuf[:0], b, MaxNodeName)
	raw, name := string(b), string(d.nameBuf)
	if changed {
		d.stats.NodesSanitised++
	}
	if d.grow(s, stringCost(len(raw), len(name))) {
		s.lastNodeRaw, s.lastNode = raw, name
	}
	return name
}
