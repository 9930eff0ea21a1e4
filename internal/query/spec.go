package query

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Attr is an attribute a query groups by.
type Attr uint8

// Group-by attributes, in the order they are shown.
const (
	AttrTime Attr = iota
	AttrNode      // where the records were observed (flow.Record.Node): "" when not set
	AttrIface
	AttrSrcIP
	AttrDstIP
	AttrSrcPort
	AttrDstPort
	AttrProto
	AttrDropReason
	AttrSampling
	AttrNATSrcIP   // source address after NAT (conntrack); none when not translated
	AttrNATDstIP   // destination address after NAT: the backend behind a VIP
	AttrNATSrcPort // source port after NAT
	AttrNATDstPort // destination port after NAT
	AttrVerdict    // firewall verdict: deny, or none
	AttrRule       // the rule behind the verdict (NFLOG prefix)
	AttrMark       // conntrack mark
	AttrZone       // conntrack zone
	// The enrichment attributes: "" when not known.
	AttrSrcWorkload     // name of the source's workload
	AttrSrcNamespace    // its namespace
	AttrSrcNode         // its node
	AttrDstWorkload     // name of the destination's workload
	AttrDstNamespace    // its namespace
	AttrDstNode         // its node
	AttrService         // the service the flow reached
	AttrServiceBackends // the service's backends
	AttrServiceGroup    // its load-balancer group(s)
	AttrServiceMatch    // how the service was found: vip, nat, backend, ambiguous, or none
	numAttrs
)

var attrText = [numAttrs]string{"time", "node", "iface", "sip", "dip", "sport", "dport", "proto", "drop_reason", "sampling",
	"nat_src_ip", "nat_dst_ip", "nat_src_port", "nat_dst_port", "verdict", "rule", "ct_mark", "ct_zone",
	"src_workload", "src_namespace", "src_node", "dst_workload", "dst_namespace", "dst_node",
	"service", "service_backends", "service_group", "service_match"}

// isNAT reports whether a is one of the post-NAT attributes, which a
// record not translated does not have.
func (a Attr) isNAT() bool { return a >= AttrNATSrcIP && a <= AttrNATDstPort }

// String is the attribute's name as ParseGroupBy accepts it.
func (a Attr) String() string {
	if a < numAttrs {
		return attrText[a]
	}
	return "attr(" + strconv.Itoa(int(a)) + ")"
}

// Presets are the named group-bys goProbe users know.
var Presets = map[string][]Attr{
	"talk_src":  {AttrSrcIP},
	"talk_dst":  {AttrDstIP},
	"talk_conv": {AttrSrcIP, AttrDstIP},
	"apps_port": {AttrDstPort, AttrProto},
	"raw":       {AttrTime, AttrIface, AttrSrcIP, AttrDstIP, AttrDstPort, AttrProto},
}

// ParseGroupBy parses a comma-separated list of attributes and presets
// ("sip,dip", "talk_conv", "time,apps_port"). Attributes are kept in the
// canonical order of the Attr constants, duplicates dropped.
func ParseGroupBy(s string) ([]Attr, error) {
	var out []Attr
	pos := 0
	for part := range strings.SplitSeq(s, ",") {
		name := strings.ToLower(strings.TrimSpace(part))
		start := pos + strings.Index(part, strings.TrimSpace(part))
		pos += len(part) + 1
		if p, ok := Presets[name]; ok {
			out = append(out, p...)
			continue
		}
		i := slices.Index(attrText[:], name)
		if i < 0 {
			if a, ok := attrNames[name]; ok && !a.either() && a != aVLAN { // condition aliases: src, dst_port, ...
				i = int(condToAttr[a])
			}
		}
		if i < 0 {
			msg := "unknown attribute; want time, node, iface, sip, dip, sport, dport, proto, drop_reason, sampling, nat_src_ip, nat_dst_ip, " +
				"nat_src_port, nat_dst_port, verdict, rule, ct_mark, ct_zone, src_workload, dst_workload, src_namespace, dst_namespace, " +
				"src_node, dst_node, service, service_backends, service_group, service_match or a preset (talk_src, talk_dst, talk_conv, apps_port, raw)"
			if name == "" {
				msg = "empty attribute"
			}
			return nil, &SyntaxError{Input: s, Pos: start, End: start + len(strings.TrimSpace(part)), Msg: msg}
		}
		out = append(out, Attr(i))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

var condToAttr = map[attr]Attr{aSrcAddr: AttrSrcIP, aDstAddr: AttrDstIP, aSrcPort: AttrSrcPort,
	aDstPort: AttrDstPort, aProto: AttrProto, aIface: AttrIface, aDropReason: AttrDropReason, aSampling: AttrSampling,
	aNATSrcAddr: AttrNATSrcIP, aNATDstAddr: AttrNATDstIP, aNATSrcPort: AttrNATSrcPort, aNATDstPort: AttrNATDstPort,
	aVerdict: AttrVerdict, aRule: AttrRule, aMark: AttrMark, aZone: AttrZone,
	aSrcWorkload: AttrSrcWorkload, aSrcNamespace: AttrSrcNamespace, aSrcNode: AttrSrcNode,
	aDstWorkload: AttrDstWorkload, aDstNamespace: AttrDstNamespace, aDstNode: AttrDstNode,
	aService: AttrService, aServiceBackends: AttrServiceBackends, aServiceGroup: AttrServiceGroup,
	aServiceMatch: AttrServiceMatch, aNode: AttrNode}

// Metric is what results are ranked by.
type Metric uint8

// Metrics. ByDropPackets and ByDropBytes rank by the kernel's drops,
// which count both directions together (they have no Direction).
const (
	ByBytes Metric = iota
	ByPackets
	ByFlows
	ByDropPackets
	ByDropBytes
)

// Direction picks which side's counters a ranking uses: Out is what the
// initiator (sip) sent, In what it received, Sum both.
type Direction uint8

// Directions.
const (
	Sum Direction = iota
	Out
	In
)

// ParseSort parses "bytes", "packets" or "flows", optionally followed by
// ":in", ":out" or ":sum" ("bytes:in"), or "drop_packets" or "drop_bytes"
// (optionally ":sum": drops count both directions together).
func ParseSort(s string) (Metric, Direction, error) {
	m, d, _ := strings.Cut(strings.ToLower(s), ":")
	var metric Metric
	switch m {
	case "bytes", "b":
		metric = ByBytes
	case "packets", "pkts", "p":
		metric = ByPackets
	case "flows", "f":
		metric = ByFlows
	case "drop_packets", "drops":
		metric = ByDropPackets
	case "drop_bytes":
		metric = ByDropBytes
	default:
		return 0, 0, fmt.Errorf("sort %q: want bytes, packets or flows (optionally :in, :out or :sum), drop_packets or drop_bytes", s)
	}
	if metric >= ByDropPackets && d != "" && d != "sum" {
		return 0, 0, fmt.Errorf("sort %q: drops count both directions together; want %s or %s:sum", s, m, m)
	}
	switch d {
	case "", "sum":
		return metric, Sum, nil
	case "out":
		return metric, Out, nil
	case "in":
		return metric, In, nil
	}
	return 0, 0, fmt.Errorf("sort %q: direction must be in, out or sum", s)
}

// ErrTime is wrapped by every time-argument error.
var ErrTime = errors.New("bad time")

// ParseTime parses a time argument: RFC 3339 ("2026-01-02T15:04:05Z",
// fractions allowed), "2026-01-02 15:04[:05]" and "2026-01-02" (UTC), Unix
// seconds ("1767225600"), "now", or a duration relative to now, in the past
// ("-24h", "-90m", "-7d", "-1d12h"; a leading "-" is optional). A time the
// store cannot hold (records keep int64 nanoseconds since 1970: MinTime to
// MaxTime) is an error, not an empty answer.
func ParseTime(s string, now time.Time) (time.Time, error) {
	t, err := parseTime(s, now)
	if err == nil && (t.Before(MinTime) || t.After(MaxTime)) {
		return time.Time{}, fmt.Errorf("%w: %q is outside the times the store holds (%s to %s)",
			ErrTime, strings.TrimSpace(s), MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	}
	return t, err
}

// The range of times weir can store and query: int64 nanoseconds since
// the Unix epoch, about 1677-09-21 to 2262-04-11.
var (
	MinTime = time.Unix(0, math.MinInt64).UTC()
	MaxTime = time.Unix(0, math.MaxInt64).UTC()
)

func parseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "now":
		return now, nil
	case s == "":
		return time.Time{}, fmt.Errorf("%w: empty", ErrTime)
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > 1<<33 {
			return time.Time{}, fmt.Errorf("%w: %q: Unix seconds out of range", ErrTime, s)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	if d, err := ParseDuration(strings.TrimPrefix(s, "-")); err == nil {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%w: %q: want RFC 3339 (2026-01-02T15:04:05Z), a date, Unix seconds, now, or a relative time such as -24h or -7d", ErrTime, s)
}

// ParseDuration is time.ParseDuration plus a "d" (24h) unit: "7d",
// "1d12h". It rejects negative durations.
func ParseDuration(s string) (time.Duration, error) {
	var days int64
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseInt(s[:i], 10, 32)
		if err != nil || n < 0 || n > 365*100 {
			return 0, fmt.Errorf("%w: duration %q", ErrTime, s)
		}
		days, s = n, s[i+1:]
		if s == "" {
			return time.Duration(days) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%w: duration %q", ErrTime, s)
	}
	return d + time.Duration(days)*24*time.Hour, nil
}
