package query

import "github.com/weir-dev/weir/internal/store"

// The post-NAT attributes (nat_src_ip, nat_dst_ip, nat_src_port,
// nat_dst_port) have no value for a record that was not translated: a
// comparison with a value never matches it and the comparison's negation
// always does ("nat_dst_port != 80" is the translated records to another
// port, "not nat_dst_port = 80" also those not translated), and the
// value "" compares with "not translated" itself ('nat_dst_ip != ""': the
// translated records).

// natMay judges a NAT leaf by the block's summaries: a block without a
// translated row (its NATVersion range is 0) matches only what rows not
// translated match; one with, by the port's range.
func (l *leaf) natMay(b *store.BlockInfo) bool {
	_, hi, ok := b.Range(store.ColNATVersion)
	if !ok {
		return true
	}
	if hi == 0 { // every row not translated
		if l.none {
			return l.op == opEq
		}
		return l.absent
	}
	if l.none || l.absent {
		return true
	}
	switch l.attr {
	case aNATSrcPort:
		return l.rangeMay(b, store.ColNATSrcPort) // the range has the 0s of rows not translated: wider, never wrong
	case aNATDstPort:
		return l.rangeMay(b, store.ColNATDstPort)
	}
	return true
}

// evalNAT evaluates a NAT leaf over the block's rows.
func (l *leaf) evalNAT(c *store.Columns, sel []bool) {
	ver := c.NATVersion[:len(sel)]
	if l.none {
		want := l.op == opEq
		for i, v := range ver {
			sel[i] = (v == 0) == want
		}
		return
	}
	switch l.attr {
	case aNATSrcAddr, aNATDstAddr:
		a := c.NATSrcAddr
		if l.attr == aNATDstAddr {
			a = c.NATDstAddr
		}
		want := l.op == opEq
		for i, v := range ver {
			if v == 0 {
				sel[i] = l.absent
				continue
			}
			sel[i] = l.addrMatch(&a[i], v) == want
		}
		return
	case aNATSrcPort:
		evalNum(l.op, l.num, c.NATSrcPort, sel)
	default:
		evalNum(l.op, l.num, c.NATDstPort, sel)
	}
	for i, v := range ver {
		if v == 0 {
			sel[i] = l.absent
		}
	}
}
