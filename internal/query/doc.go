// Package query answers questions about stored flows: which groups (by
// time, node, interface, addresses, ports, protocol, drop reason, sampling rate,
// NAT, verdict, conntrack, workloads and services)
// carried the most bytes, packets or flows, or had the most packets or
// bytes dropped, under a condition, over a time range.
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
// address), sport, dport, port (either port), proto, iface, vlan,
// drop_reason (the kernel's name for the latest drop: NO_SOCKET,
// NETFILTER_DROP, ...; "" when none; compared ignoring ASCII case),
// sampling (N for 1-in-N sampled counts, 0 or 1 when unsampled),
// nat_src_ip, nat_dst_ip, nat_src_port, nat_dst_port (the key after NAT,
// conntrack source; a record not translated has no value: it matches
// `nat_dst_ip = ""` and the negation of any other comparison, never the
// comparison itself), verdict (deny, or "" / none), rule (the NFLOG
// prefix, exact), ct_mark and ct_zone (conntrack; 0 when none),
// src_workload, src_namespace, src_node, dst_workload, dst_namespace,
// dst_node (the workloads at the two ends), service, service_backends,
// service_group (the service the flow reached; all exact strings, ""
// when not known), service_match (vip, nat, backend, ambiguous, or ""
// / none) and node (where the record was observed: an agent's
// --node-name or host name, a collector's exporter; exact, "" when not
// set). Address
// values are an address or a CIDR prefix (10.0.0.0/8, 2001:db8::/32); an
// IPv4 value never matches an IPv6 row. Ports take numbers or service names
// (https), proto numbers or names (tcp, udp, icmp, icmpv6, gre, ...), and a
// protocol name alone means proto = name. Addresses, iface, drop_reason,
// verdict, rule, node and the workload and service attributes compare only
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
//
// DropPackets and DropBytes sum what the kernel dropped of the records'
// flows (both directions together; eBPF source with drops). Results rank
// by them with ByDropPackets and ByDropBytes; the table and CSV outputs
// show them only when a record of the result had drops or the ranking is
// by them, and JSON only when not 0, so output without drops is as it was.
// Counts are stored as counted: a sampled record (sampling N > 1) is not
// scaled.
package query
