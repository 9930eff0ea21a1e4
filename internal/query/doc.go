// Package query answers questions about stored flows: which groups (by
// time, interface, addresses, ports, protocol) carried the most bytes,
// packets or flows, under a condition, over a time range.
//
// Run lists the store's blocks in the time range, skips those whose
// summaries (min/max per column, bloom filters of addresses and ports) rule
// the condition out, decodes only the columns the query needs from the rest
// on several goroutines, filters rows with vectorised comparisons, sums them
// per group, and ranks the groups.
//
// # Conditions
//
//	cond   = or
//	or     = and { ("or" | "||") and }
//	and    = unary { ("and" | "&&") unary }
//	unary  = ("not" | "!") unary | "(" cond ")" | prim
//	prim   = ATTR [OP] VALUE | PROTONAME
//	OP     = "=" | "==" | "!=" | "<" | "<=" | ">" | ">="   (default "=")
//
// Attributes: sip (src, snet), dip (dst, dnet), host and net (either
// address), sport, dport, port (either port), proto, iface, vlan. Address
// values are an address or a CIDR prefix (10.0.0.0/8, 2001:db8::/32); an
// IPv4 value never matches an IPv6 row. Ports take numbers or service names
// (https), proto numbers or names (tcp, udp, icmp, icmpv6, gre, ...), and a
// protocol name alone means proto = name. Addresses and iface compare only
// with = and !=. For the either-side attributes, != means neither side
// ("port != 22"), every other operator means either side, so "not X" is
// always the exact negation of X. Words may be quoted with ' or " (a
// backslash escapes the next byte). A mistake is a *SyntaxError with the
// offset of the offending token.
//
// # Semantics
//
// A record counts when From <= Start < To, so adjacent ranges partition
// records. Grouped by time, it counts in the bin of its Start. Counters
// keep the record's orientation: "out" is what the initiator (sip) sent,
// "in" what it received. Flows counts records: a long flow reported every
// active timeout is several records.
package query
