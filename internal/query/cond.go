package query

import (
	"encoding/binary"
	"net/netip"
	"strconv"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/iana"
	"github.com/weir-dev/weir/internal/store"
)

// attr is an attribute a condition compares.
type attr uint8

const (
	aSrcAddr attr = iota
	aDstAddr
	aAddr // either address
	aSrcPort
	aDstPort
	aPort // either port
	aProto
	aIface
	aVLAN
	aDropReason
	aSampling
	aNATSrcAddr // the post-NAT attributes (cond_nat.go): absent for rows not translated
	aNATDstAddr
	aNATSrcPort
	aNATDstPort
	aVerdict
	aRule
	aMark
	aZone
	aSrcWorkload // the enrichment attributes (cond_enrich.go): "" when not known
	aSrcNamespace
	aSrcNode
	aDstWorkload
	aDstNamespace
	aDstNode
	aService
	aServiceBackends
	aServiceGroup
	aServiceMatch
	aNode // where the record was observed: "" when not set
)

func (a attr) isAddr() bool { return a <= aAddr || a == aNATSrcAddr || a == aNATDstAddr }
func (a attr) either() bool { return a == aAddr || a == aPort }
func (a attr) isNAT() bool  { return a >= aNATSrcAddr && a <= aNATDstPort }

var attrShow = [...]string{"sip", "dip", "host", "sport", "dport", "port", "proto", "iface", "vlan", "drop_reason", "sampling",
	"nat_src_ip", "nat_dst_ip", "nat_src_port", "nat_dst_port", "verdict", "rule", "ct_mark", "ct_zone",
	"src_workload", "src_namespace", "src_node", "dst_workload", "dst_namespace", "dst_node",
	"service", "service_backends", "service_group", "service_match", "node"}

type cmpOp uint8

const (
	opEq cmpOp = iota
	opNe
	opLt
	opLe
	opGt
	opGe
)

var opShow = [...]string{"=", "!=", "<", "<=", ">", ">="}

// negate is the operator of the negated comparison.
var negate = [...]cmpOp{opNe, opEq, opGe, opGt, opLe, opLt}

func (o cmpOp) test(v, x uint64) bool {
	switch o {
	case opEq:
		return v == x
	case opNe:
		return v != x
	case opLt:
		return v < x
	case opLe:
		return v <= x
	case opGt:
		return v > x
	}
	return v >= x
}

// node is a condition tree in negation normal form after normalize: only
// and, or and leaves (a not is pushed into its leaves).
type node interface {
	String() string
	needs() store.Column
	// mayMatch is false only when no row of the block can match.
	mayMatch(b *store.BlockInfo) bool
	// eval sets sel[i] to whether row i matches; e supplies scratch.
	eval(c *store.Columns, sel []bool, e *evaluator)
}

type andNode struct{ l, r node }
type orNode struct {
	l, r node
	set  *addrSet // not nil: the or's leaves are one address column's equalities, tested together (fuse)
}
type notNode struct{ x node }

// leaf compares one attribute. For the either-side attributes (host, net,
// port) all=false means "some side satisfies op" and all=true "every side
// does": "port != 22" is all (neither side is 22), so that a not in front of
// any comparison is its exact negation.
type leaf struct {
	attr attr
	op   cmpOp
	all  bool
	num  uint64   // ports, proto, vlan, sampling
	addr [16]byte // addresses: IPv4-mapped for IPv4
	bits uint8    // prefix length in the 128-bit space
	v4   bool
	str  string // iface; drop_reason (upper case); rule
	// For the NAT attributes: none compares with "not translated" (the
	// value ""), and absent is whether a row not translated matches a
	// comparison with a value: false as written, true once negated, so
	// that "not X" is X's exact negation.
	none, absent bool
}

// normalize pushes negations down to the leaves (De Morgan), so that each
// leaf can both test rows and rule blocks out by their summaries.
func normalize(n node, neg bool) node {
	switch n := n.(type) {
	case *notNode:
		return normalize(n.x, !neg)
	case *andNode:
		l, r := normalize(n.l, neg), normalize(n.r, neg)
		if neg {
			return &orNode{l: l, r: r}
		}
		return &andNode{l, r}
	case *orNode:
		l, r := normalize(n.l, neg), normalize(n.r, neg)
		if neg {
			return &andNode{l, r}
		}
		return &orNode{l: l, r: r}
	case *leaf:
		c := *n
		if neg {
			c.op = negate[c.op]
			c.all = c.attr.either() && !c.all
			c.absent = c.attr.isNAT() && !c.absent
		}
		return &c
	}
	panic("query: unknown node")
}

func (n *andNode) String() string { return group(n.l, true) + " and " + group(n.r, true) }
func (n *orNode) String() string  { return group(n.l, false) + " or " + group(n.r, false) }
func (n *notNode) String() string { return "not " + group(n.x, true) }

// group parenthesizes an or inside an and.
func group(n node, inAnd bool) string {
	if _, ok := n.(*orNode); ok && inAnd {
		return "(" + n.String() + ")"
	}
	return n.String()
}

func (l *leaf) String() string {
	op, prefix := l.op, ""
	natural := l.attr.either() && op == opNe // the quantifier "port != x" reads as
	if l.attr.either() && l.all != natural || l.absent && !l.none {
		op, prefix = negate[op], "not "
	}
	return prefix + attrShow[l.attr] + " " + opShow[op] + " " + l.value()
}

func (l *leaf) value() string {
	switch {
	case l.none:
		return `""`
	case l.attr == aVerdict:
		return quote(flow.Verdict(l.num).String())
	case l.attr == aRule || l.attr == aNode || l.attr.isEnrichStr():
		return quote(l.str)
	case l.attr == aServiceMatch:
		return quote(flow.ServiceMatch(l.num).String())
	case l.attr.isAddr():
		a := netip.AddrFrom16(l.addr)
		bits := int(l.bits)
		if l.v4 {
			a, bits = a.Unmap(), bits-96
		}
		if bits == a.BitLen() {
			return a.String()
		}
		return netip.PrefixFrom(a, bits).String()
	case l.attr == aProto:
		return iana.ProtoName(uint8(l.num))
	case l.attr == aIface || l.attr == aDropReason:
		return quote(l.str)
	}
	return strconv.FormatUint(l.num, 10)
}

func (n *andNode) needs() store.Column { return n.l.needs() | n.r.needs() }
func (n *orNode) needs() store.Column  { return n.l.needs() | n.r.needs() }
func (n *notNode) needs() store.Column { return n.x.needs() }

func (l *leaf) needs() store.Column {
	switch l.attr {
	case aSrcAddr: // the dictionary form: evalAddr tests each distinct address once
		return store.ColSrcAddrIdx
	case aDstAddr:
		return store.ColDstAddrIdx
	case aAddr:
		return store.ColSrcAddrIdx | store.ColDstAddrIdx
	case aSrcPort:
		return store.ColSrcPort
	case aDstPort:
		return store.ColDstPort
	case aPort:
		return store.ColSrcPort | store.ColDstPort
	case aProto:
		return store.ColProto
	case aVLAN:
		return store.ColVLAN
	case aDropReason:
		return store.ColDropReason
	case aSampling:
		return store.ColSampling
	case aNATSrcAddr:
		return store.ColNATSrcAddr
	case aNATDstAddr:
		return store.ColNATDstAddr
	case aNATSrcPort:
		return store.ColNATSrcPort | store.ColNATVersion
	case aNATDstPort:
		return store.ColNATDstPort | store.ColNATVersion
	case aVerdict:
		return store.ColVerdict
	case aRule:
		return store.ColRule
	case aMark:
		return store.ColMark
	case aZone:
		return store.ColZone
	case aServiceMatch:
		return store.ColServiceMatch
	case aNode:
		return store.ColNode
	}
	if l.attr.isEnrichStr() {
		return enrichCol(int(l.attr - aSrcWorkload))
	}
	return 0 // iface is the block's
}

func (n *andNode) mayMatch(b *store.BlockInfo) bool { return n.l.mayMatch(b) && n.r.mayMatch(b) }
func (n *orNode) mayMatch(b *store.BlockInfo) bool  { return n.l.mayMatch(b) || n.r.mayMatch(b) }
func (n *notNode) mayMatch(b *store.BlockInfo) bool { return true }

func (l *leaf) mayMatch(b *store.BlockInfo) bool {
	switch l.attr {
	case aIface:
		return l.op.test(boolU(b.Iface == l.str), 1)
	case aSrcAddr, aDstAddr, aAddr:
		if l.op != opEq || l.bits != 128 {
			return true // the filters answer only exact membership
		}
		src, dst := b.MayContainSrc(l.addr), b.MayContainDst(l.addr)
		return l.combine(src, dst)
	case aSrcPort:
		return l.portMay(b, true)
	case aDstPort:
		return l.portMay(b, false)
	case aPort:
		return l.combine(l.portMay(b, true), l.portMay(b, false))
	case aProto:
		return l.rangeMay(b, store.ColProto)
	case aVLAN:
		return l.rangeMay(b, store.ColVLAN)
	case aSampling:
		return l.rangeMay(b, store.ColSampling)
	case aDropReason:
		return l.strMay(b, store.ColDropReason)
	case aRule:
		return l.strMay(b, store.ColRule)
	case aNode:
		return l.strMay(b, store.ColNode)
	case aVerdict:
		return l.rangeMay(b, store.ColVerdict)
	case aMark:
		return l.rangeMay(b, store.ColMark)
	case aZone:
		return l.rangeMay(b, store.ColZone)
	case aServiceMatch:
		return l.rangeMay(b, store.ColServiceMatch)
	case aNATSrcAddr, aNATDstAddr, aNATSrcPort, aNATDstPort:
		return l.natMay(b)
	}
	return true
}

// strMay judges a drop_reason, rule or node leaf by the block's range of string
// lengths: no string of the value's length means no equal one, and a
// block whose strings are all empty has none unequal to "".
func (l *leaf) strMay(b *store.BlockInfo, col store.Column) bool {
	lo, hi, ok := b.Range(col)
	if !ok {
		return true
	}
	n := uint64(len(l.str))
	if l.op == opEq {
		return lo <= n && n <= hi
	}
	return !(n == 0 && hi == 0)
}

// combine joins the two sides of a leaf: either side, or both for all.
func (l *leaf) combine(src, dst bool) bool {
	switch l.attr {
	case aSrcAddr, aSrcPort:
		return src
	case aDstAddr, aDstPort:
		return dst
	}
	if l.all {
		return src && dst
	}
	return src || dst
}

func (l *leaf) portMay(b *store.BlockInfo, src bool) bool {
	col := store.ColDstPort
	if src {
		col = store.ColSrcPort
	}
	if !l.rangeMay(b, col) {
		return false
	}
	if l.op == opEq {
		if src {
			return b.MayContainSrcPort(uint16(l.num))
		}
		return b.MayContainDstPort(uint16(l.num))
	}
	return true
}

// rangeMay reports whether some value in the block's [lo, hi] for col can
// satisfy the comparison.
func (l *leaf) rangeMay(b *store.BlockInfo, col store.Column) bool {
	lo, hi, ok := b.Range(col)
	if !ok {
		return true
	}
	x := l.num
	switch l.op {
	case opEq:
		return lo <= x && x <= hi
	case opNe:
		return !(lo == x && hi == x)
	case opLt:
		return lo < x
	case opLe:
		return lo <= x
	case opGt:
		return hi > x
	}
	return hi >= x
}

func boolU(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// Matches reports whether the condition could match any row of block b
// judging by its summaries; false means the block can be skipped unread.
func (c *Condition) mayMatch(b *store.BlockInfo) bool { return c == nil || c.root.mayMatch(b) }

// columns are the columns the condition reads.
func (c *Condition) columns() store.Column {
	if c == nil {
		return 0
	}
	return c.root.needs()
}

// addrMatch tests a 16-byte address against the leaf's prefix.
func (l *leaf) addrMatch(a *[16]byte, ver uint8) bool {
	return (ver == 4) == l.v4 && l.prefixMatch(a)
}

// prefixMatch tests a 16-byte address against the leaf's prefix, whatever
// its family.
func (l *leaf) prefixMatch(a *[16]byte) bool {
	hi, lo := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
	wh, wl := binary.BigEndian.Uint64(l.addr[:8]), binary.BigEndian.Uint64(l.addr[8:])
	mh, ml := prefixMask(l.bits)
	return hi&mh == wh&mh && lo&ml == wl&ml
}

// prefixMask is the 128-bit mask of a prefix length, as two halves.
func prefixMask(bits uint8) (hi, lo uint64) {
	switch {
	case bits == 0:
		return 0, 0
	case bits <= 64:
		return ^uint64(0) << (64 - bits), 0
	case bits < 128:
		return ^uint64(0), ^uint64(0) << (128 - bits)
	}
	return ^uint64(0), ^uint64(0)
}
