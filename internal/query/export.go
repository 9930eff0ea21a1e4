package query

// This file lets other engines answer a Query (internal/clickhouse
// translates it to SQL): a read-only view of a parsed condition, and the
// ranking Run uses, so that both stores order and cut rows alike.

// CondNode is one node of a condition in negation normal form: an And or
// Or of L and R, or a Leaf.
type CondNode struct {
	Kind CondKind
	L, R *CondNode
	Leaf *CondLeaf
}

// CondKind says what a CondNode is.
type CondKind uint8

// Condition node kinds.
const (
	CondLeafKind CondKind = iota
	CondAnd
	CondOr
)

// CondLeaf is one comparison, with the semantics eval gives it.
type CondLeaf struct {
	// Attr is the attribute's canonical name: sip, dip, host, sport,
	// dport, port, proto, iface, vlan, drop_reason, sampling, nat_src_ip,
	// nat_dst_ip, nat_src_port, nat_dst_port, verdict, rule, ct_mark,
	// ct_zone, the enrichment names, service_match, node.
	Attr string
	Op   string // =, !=, <, <=, >, >=
	// All is for host, net and port: every side must satisfy Op (else
	// some side).
	All  bool
	Num  uint64   // numbers; verdict and service_match as their codes
	Addr [16]byte // addresses: the prefix, IPv4 as IPv4-mapped
	Bits uint8    // prefix length in the 128-bit space
	V4   bool     // an IPv4 prefix: matches only rows of IP version 4
	// Str is the string value; drop_reason's is upper-case and compares
	// ignoring ASCII case.
	Str string
	// None compares a NAT attribute with "not translated"; Absent is what
	// a row not translated gives any other NAT comparison.
	None, Absent bool
}

// Tree returns the condition's tree, nil for the nil condition.
func (c *Condition) Tree() *CondNode {
	if c == nil {
		return nil
	}
	return view(c.root)
}

func view(n node) *CondNode {
	switch n := n.(type) {
	case *andNode:
		return &CondNode{Kind: CondAnd, L: view(n.l), R: view(n.r)}
	case *orNode:
		return &CondNode{Kind: CondOr, L: view(n.l), R: view(n.r)}
	case *leaf:
		return &CondNode{Leaf: &CondLeaf{Attr: attrShow[n.attr], Op: opShow[n.op], All: n.all, Num: n.num, Addr: n.addr,
			Bits: n.bits, V4: n.v4, Str: n.str, None: n.none, Absent: n.absent}}
	}
	panic("query: unknown node") // normalize leaves no other
}

// Rank sorts rows as Run does (by time bin, then the sort value, ties by
// key) and keeps the top q.Limit per time bin.
func Rank(q *Query, rows []Row) []Row { return cut(q, rows) }
