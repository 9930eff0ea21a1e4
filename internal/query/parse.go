package query

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/iana"
)

// Condition is a parsed filter: which flow records a query counts. The
// zero of *Condition (nil) matches every record.
type Condition struct {
	root node
}

// maxDepth bounds nesting so that hostile input cannot exhaust the stack.
const maxDepth = 200

// ParseCondition parses a condition (grammar in the package doc). An empty
// or all-blank string is the nil Condition, which matches everything. A
// mistake is a *SyntaxError pointing at the offending token.
func ParseCondition(s string) (*Condition, error) {
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	if toks[0].kind == tEOF {
		return nil, nil
	}
	p := &parser{in: s, toks: toks}
	n, err := p.or(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		if t.kind == tRParen {
			return nil, p.errAt(t, "unbalanced ')'")
		}
		return nil, p.errAt(t, "expected 'and', 'or' or the end of the condition")
	}
	root := normalize(n, false)
	fuse(root)
	return &Condition{root: root}, nil
}

// String is the condition in canonical form: parsing it again gives the
// same condition.
func (c *Condition) String() string {
	if c == nil {
		return ""
	}
	return c.root.String()
}

type parser struct {
	in   string
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) errAt(t token, msg string) error {
	return &SyntaxError{Input: p.in, Pos: t.pos, End: t.end, Msg: msg}
}

// or := and { "or" and }
func (p *parser) or(depth int) (node, error) {
	l, err := p.and(depth)
	if err != nil {
		return nil, err
	}
	for p.peek().kind == tOr {
		p.next()
		r, err := p.and(depth)
		if err != nil {
			return nil, err
		}
		l = &orNode{l: l, r: r}
	}
	return l, nil
}

// and := unary { "and" unary }
func (p *parser) and(depth int) (node, error) {
	l, err := p.unary(depth)
	if err != nil {
		return nil, err
	}
	for p.peek().kind == tAnd {
		p.next()
		r, err := p.unary(depth)
		if err != nil {
			return nil, err
		}
		l = &andNode{l, r}
	}
	return l, nil
}

// unary := "not" unary | "(" or ")" | primitive
func (p *parser) unary(depth int) (node, error) {
	t := p.peek()
	if depth > maxDepth {
		return nil, p.errAt(t, fmt.Sprintf("nested more than %d deep", maxDepth))
	}
	switch t.kind {
	case tNot:
		p.next()
		x, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		return &notNode{x}, nil
	case tLParen:
		p.next()
		x, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tRParen {
			return nil, p.errAt(c, fmt.Sprintf("expected ')' to close the '(' at offset %d", t.pos))
		}
		return x, nil
	case tWord:
		return p.primitive()
	case tEOF:
		return nil, p.errAt(t, "condition ends too early")
	}
	return nil, p.errAt(t, "expected a comparison such as 'dport = 443', 'host 10.0.0.1' or 'not ...'")
}

// attrNames maps the names a condition accepts to attributes.
var attrNames = map[string]attr{
	"sip": aSrcAddr, "src": aSrcAddr, "srcip": aSrcAddr, "src_ip": aSrcAddr, "snet": aSrcAddr,
	"dip": aDstAddr, "dst": aDstAddr, "dstip": aDstAddr, "dst_ip": aDstAddr, "dnet": aDstAddr,
	"host": aAddr, "net": aAddr,
	"sport": aSrcPort, "src_port": aSrcPort,
	"dport": aDstPort, "dst_port": aDstPort,
	"port":  aPort,
	"proto": aProto, "protocol": aProto,
	"iface": aIface, "interface": aIface,
	"vlan":        aVLAN,
	"drop_reason": aDropReason,
	"sampling":    aSampling,
	"nat_src_ip":  aNATSrcAddr, "nat_sip": aNATSrcAddr,
	"nat_dst_ip": aNATDstAddr, "nat_dip": aNATDstAddr,
	"nat_src_port": aNATSrcPort, "nat_sport": aNATSrcPort,
	"nat_dst_port": aNATDstPort, "nat_dport": aNATDstPort,
	"verdict": aVerdict,
	"rule":    aRule,
	"ct_mark": aMark, "mark": aMark,
	"ct_zone": aZone, "zone": aZone,
	"src_workload": aSrcWorkload, "src_namespace": aSrcNamespace, "src_node": aSrcNode,
	"dst_workload": aDstWorkload, "dst_namespace": aDstNamespace, "dst_node": aDstNode,
	"service": aService, "service_backends": aServiceBackends, "service_group": aServiceGroup,
	"service_match": aServiceMatch,
	"node":          aNode,
}

// primitive := ATTR [OP] VALUE | PROTONAME
func (p *parser) primitive() (node, error) {
	t := p.next()
	name := strings.ToLower(t.text)
	a, ok := attrNames[name]
	if !ok {
		if n, ok := iana.LookupProto(name); ok {
			return &leaf{attr: aProto, op: opEq, num: uint64(n)}, nil
		}
		msg := fmt.Sprintf("unknown attribute %q", t.text)
		if s := suggestAttr(name); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		} else {
			msg += "; want sip, dip, host, net, snet, dnet, sport, dport, port, proto, iface, vlan, drop_reason, sampling, " +
				"nat_src_ip, nat_dst_ip, nat_src_port, nat_dst_port, verdict, rule, ct_mark, ct_zone, src_workload, dst_workload, " +
				"src_namespace, dst_namespace, src_node, dst_node, service, service_backends, service_group, service_match, node or a protocol name"
		}
		return nil, p.errAt(t, msg)
	}
	l := &leaf{attr: a, op: opEq}
	if o := p.peek(); o.kind == tOp {
		p.next()
		l.op = ops[o.text]
		if (a.isAddr() || a == aIface || a == aDropReason || a == aVerdict || a == aRule || a == aNode || a.isEnrichStr() || a == aServiceMatch) && l.op != opEq && l.op != opNe {
			return nil, p.errAt(o, fmt.Sprintf("%s compares only with = or !=", name))
		}
	}
	l.all = a.either() && l.op == opNe // "port != 22": neither side is 22
	v := p.next()
	if v.kind != tWord {
		return nil, p.errAt(v, fmt.Sprintf("expected a value for %s", name))
	}
	if err := l.setValue(v.text); err != "" {
		return nil, p.errAt(v, err)
	}
	return l, nil
}

var ops = map[string]cmpOp{"=": opEq, "==": opEq, "!=": opNe, "<": opLt, "<=": opLe, ">": opGt, ">=": opGe}

// setValue parses w as the leaf's value; it returns what is wrong, or "".
func (l *leaf) setValue(w string) string {
	if l.attr.isNAT() && w == "" { // "not translated"
		if l.op != opEq && l.op != opNe {
			return fmt.Sprintf(`%s = "" (not translated) compares only with = or !=`, attrShow[l.attr])
		}
		l.none = true
		return ""
	}
	switch l.attr {
	case aSrcAddr, aDstAddr, aAddr, aNATSrcAddr, aNATDstAddr:
		return l.setPrefix(w)
	case aVerdict:
		v, err := flow.ParseVerdict(strings.ToLower(w))
		if strings.EqualFold(w, "none") {
			v, err = flow.VerdictNone, nil
		}
		if err != nil {
			return `expected a verdict: deny, or "" or none for records without one`
		}
		l.num = uint64(v)
	case aRule, aNode, aSrcWorkload, aSrcNamespace, aSrcNode, aDstWorkload, aDstNamespace, aDstNode, aService, aServiceBackends, aServiceGroup:
		l.str = w
	case aServiceMatch:
		m, err := flow.ParseServiceMatch(strings.ToLower(w))
		if strings.EqualFold(w, "none") {
			m, err = flow.ServiceMatchNone, nil
		}
		if err != nil {
			return `expected a service match: vip, nat, backend, ambiguous, or "" or none for records without a service`
		}
		l.num = uint64(m)
	case aMark:
		return l.setNum(w, math.MaxUint32, "a conntrack mark (0-4294967295)")
	case aZone:
		return l.setNum(w, math.MaxUint16, "a conntrack zone (0-65535)")
	case aNATSrcPort, aNATDstPort:
		return l.setNum(w, 65535, `a port number (0-65535), or "" for records not translated`)
	case aSrcPort, aDstPort, aPort:
		if s, ok := iana.LookupService(strings.ToLower(w)); ok {
			l.num = uint64(s.Port)
			return ""
		}
		return l.setNum(w, 65535, "a port number (0-65535) or a service name such as https")
	case aProto:
		if n, ok := iana.LookupProto(strings.ToLower(w)); ok {
			l.num = uint64(n)
			return ""
		}
		return l.setNum(w, 255, "a protocol number (0-255) or name such as tcp")
	case aVLAN:
		return l.setNum(w, 4095, "a VLAN ID (0-4095)")
	case aSampling:
		return l.setNum(w, math.MaxUint32, "a sampling rate N (0-4294967295; 0 and 1: unsampled)")
	case aIface:
		l.str = w
	case aDropReason:
		l.str = upperASCII(w) // kernel names are upper case; compared ignoring ASCII case
	}
	return ""
}

// upperASCII upper-cases the ASCII letters of w and leaves other bytes.
func upperASCII(w string) string {
	b := []byte(w)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func (l *leaf) setNum(w string, limit uint64, want string) string {
	n, err := strconv.ParseUint(w, 10, 64)
	if err != nil || n > limit {
		return "expected " + want
	}
	l.num = n
	return ""
}

// setPrefix parses an address or CIDR prefix. IPv4 is kept IPv4-mapped
// (as the store keeps it) and marked v4, so that it never matches IPv6 rows.
func (l *leaf) setPrefix(w string) string {
	var pfx netip.Prefix
	if strings.Contains(w, "/") {
		var err error
		if pfx, err = netip.ParsePrefix(w); err != nil {
			return "expected an IP prefix such as 10.0.0.0/8 or 2001:db8::/32"
		}
		if m := pfx.Masked(); m != pfx {
			return fmt.Sprintf("%s has bits set past the prefix length; did you mean %s?", w, m)
		}
	} else {
		a, err := netip.ParseAddr(w)
		if err != nil || a.Zone() != "" {
			return "expected an IP address or prefix such as 10.0.0.1 or 10.0.0.0/8"
		}
		pfx = netip.PrefixFrom(a, a.BitLen())
	}
	a := pfx.Addr()
	l.v4 = a.Is4()
	bits := pfx.Bits()
	if l.v4 {
		bits += 96
	}
	l.bits = uint8(bits)
	l.addr = a.As16()
	return ""
}

// suggestAttr proposes the attribute name closest to w (one edit away).
func suggestAttr(w string) string {
	var names []string
	for n := range attrNames {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if editDistance1(w, n) {
			return n
		}
	}
	return ""
}

// editDistance1 reports whether a and b differ by exactly one insertion,
// deletion, substitution or adjacent transposition.
func editDistance1(a, b string) bool {
	if a == b || len(a)-len(b) > 1 || len(b)-len(a) > 1 {
		return false
	}
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	switch {
	case len(a) == len(b):
		if a[i+1:] == b[i+1:] {
			return true
		}
		return i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
	case len(a) > len(b):
		return a[i+1:] == b[i:]
	default:
		return a[i:] == b[i+1:]
	}
}
