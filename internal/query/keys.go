package query

import "github.com/weir-dev/weir/internal/store"

// rowLabel is row i's label: base with the grouped label attributes.
func (sc *scanner) rowLabel(l label, c *store.Columns, i int) label {
	g := &sc.group
	if g[AttrNode] {
		l.node = c.Node[i]
	}
	if g[AttrDropReason] {
		l.reason = c.DropReason[i]
	}
	if g[AttrSampling] {
		l.sampling = c.Sampling[i]
	}
	if g[AttrNATSrcIP] || g[AttrNATDstIP] || g[AttrNATSrcPort] || g[AttrNATDstPort] {
		if v := c.NATVersion[i]; v != 0 {
			l.nat = true
			if g[AttrNATSrcIP] {
				l.natSrc = addrKey{c.NATSrcAddr[i], v}
			}
			if g[AttrNATDstIP] {
				l.natDst = addrKey{c.NATDstAddr[i], v}
			}
			if g[AttrNATSrcPort] {
				l.natSPort = c.NATSrcPort[i]
			}
			if g[AttrNATDstPort] {
				l.natDPort = c.NATDstPort[i]
			}
		}
	}
	if g[AttrVerdict] {
		l.verdict = c.Verdict[i]
	}
	if g[AttrRule] {
		l.rule = c.Rule[i]
	}
	if g[AttrMark] {
		l.mark = c.Mark[i]
	}
	if g[AttrZone] {
		l.zone = c.Zone[i]
	}
	if sc.enrich {
		for k := range numEnrichStrs {
			if g[AttrSrcWorkload+Attr(k)] {
				l.enr[k] = enrichValue(c, k, i)
			}
		}
		if g[AttrServiceMatch] {
			l.smatch = c.ServiceMatch[i]
		}
	}
	return l
}

// compare orders keys deterministically, for ties.
func (k *Key) compare(o *Key) int {
	if c := k.Time.Compare(o.Time); c != 0 {
		return c
	}
	if k.Node != o.Node {
		return cmpStr(k.Node, o.Node)
	}
	if k.Iface != o.Iface {
		return cmpStr(k.Iface, o.Iface)
	}
	if c := k.SrcIP.Compare(o.SrcIP); c != 0 {
		return c
	}
	if c := k.DstIP.Compare(o.DstIP); c != 0 {
		return c
	}
	if k.SrcPort != o.SrcPort {
		return int(k.SrcPort) - int(o.SrcPort)
	}
	if k.DstPort != o.DstPort {
		return int(k.DstPort) - int(o.DstPort)
	}
	if k.Proto != o.Proto {
		return int(k.Proto) - int(o.Proto)
	}
	if k.DropReason != o.DropReason {
		return cmpStr(k.DropReason, o.DropReason)
	}
	if k.Sampling != o.Sampling {
		return cmpNum(k.Sampling, o.Sampling)
	}
	if k.NATed != o.NATed {
		return cmpNum(boolU(k.NATed), boolU(o.NATed))
	}
	if c := k.NATSrcIP.Compare(o.NATSrcIP); c != 0 {
		return c
	}
	if c := k.NATDstIP.Compare(o.NATDstIP); c != 0 {
		return c
	}
	if k.NATSrcPort != o.NATSrcPort {
		return cmpNum(k.NATSrcPort, o.NATSrcPort)
	}
	if k.NATDstPort != o.NATDstPort {
		return cmpNum(k.NATDstPort, o.NATDstPort)
	}
	if k.Verdict != o.Verdict {
		return cmpNum(k.Verdict, o.Verdict)
	}
	if k.Rule != o.Rule {
		return cmpStr(k.Rule, o.Rule)
	}
	if k.Mark != o.Mark {
		return cmpNum(k.Mark, o.Mark)
	}
	if k.Zone != o.Zone {
		return cmpNum(k.Zone, o.Zone)
	}
	for a := AttrSrcWorkload; a <= AttrServiceGroup; a++ {
		if x, y := k.enrichStr(a), o.enrichStr(a); x != y {
			return cmpStr(x, y)
		}
	}
	if k.ServiceMatch != o.ServiceMatch {
		return cmpNum(k.ServiceMatch, o.ServiceMatch)
	}
	return 0
}

// cmpNum orders two numbers.
func cmpNum[T ~uint8 | ~uint16 | ~uint32 | ~uint64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpStr(a, b string) int {
	if a < b {
		return -1
	}
	return 1
}
