package query

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/iana"
	"github.com/weir-dev/weir/internal/termsafe"
)

// Format is an output format.
type Format uint8

// Formats.
const (
	Table Format = iota // aligned columns, human units, totals and a summary
	JSON                // one JSON document: query, rows, totals, stats
	CSV                 // a header and one line per row, exact numbers
)

// ParseFormat parses "table", "json" or "csv".
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "table", "text":
		return Table, nil
	case "json":
		return JSON, nil
	case "csv":
		return CSV, nil
	}
	return 0, fmt.Errorf("output %q: want table, json or csv", s)
}

// Write writes res to w in format f.
func (res *Result) Write(w io.Writer, f Format) error {
	switch f {
	case JSON:
		return res.writeJSON(w)
	case CSV:
		return res.writeCSV(w)
	}
	return res.writeTable(w)
}

// cell is attribute a of row k as text.
func cell(k *Key, a Attr) string {
	switch a {
	case AttrTime:
		return k.Time.Format(time.RFC3339)
	case AttrNode:
		return k.Node
	case AttrIface:
		return k.Iface
	case AttrSrcIP:
		return k.SrcIP.String()
	case AttrDstIP:
		return k.DstIP.String()
	case AttrSrcPort:
		return strconv.Itoa(int(k.SrcPort))
	case AttrDstPort:
		return strconv.Itoa(int(k.DstPort))
	case AttrProto:
		return iana.ProtoName(k.Proto)
	case AttrDropReason:
		return k.DropReason
	case AttrSampling:
		return strconv.FormatUint(uint64(k.Sampling), 10)
	case AttrVerdict:
		return k.Verdict.String()
	case AttrRule:
		return k.Rule
	case AttrMark:
		return strconv.FormatUint(uint64(k.Mark), 10)
	case AttrZone:
		return strconv.FormatUint(uint64(k.Zone), 10)
	case AttrServiceMatch:
		return k.ServiceMatch.String()
	}
	if a.isEnrichStr() {
		return k.enrichStr(a)
	}
	if !k.NATed { // a NAT attribute of records not translated: none
		return ""
	}
	switch a {
	case AttrNATSrcIP:
		return k.NATSrcIP.String()
	case AttrNATDstIP:
		return k.NATDstIP.String()
	case AttrNATSrcPort:
		return strconv.Itoa(int(k.NATSrcPort))
	case AttrNATDstPort:
		return strconv.Itoa(int(k.NATDstPort))
	}
	return ""
}

// noneInTable says whether attribute a shows "-" in the table for no
// value (a drop reason, verdict or rule that is "", a NAT attribute of
// records not translated); CSV leaves the cell empty, JSON has "" or null.
func noneInTable(a Attr) bool {
	return a == AttrNode || a == AttrDropReason || a == AttrVerdict || a == AttrRule || a.isNAT() || a.isEnrichStr() || a == AttrServiceMatch
}

// showDrops says whether the table and CSV have the drop columns: when
// some record of the result had drops, or it is ranked by them. Output
// without drops stays as it was before they existed.
func (res *Result) showDrops() bool {
	return res.Totals.DropPackets != 0 || res.Totals.DropBytes != 0 ||
		res.Query.Sort == ByDropPackets || res.Query.Sort == ByDropBytes
}

func (res *Result) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var hdr []string
	for _, a := range res.Query.Group {
		hdr = append(hdr, a.String())
	}
	hdr = append(hdr, "flows", "pkts out", "pkts in", "pkts", "%", "bytes out", "bytes in", "bytes", "%")
	drops := res.showDrops()
	if drops {
		hdr = append(hdr, "dropped pkts", "dropped bytes")
	}
	fmt.Fprintln(tw, strings.Join(hdr, "\t")+"\t")
	tot := res.Totals
	for i := range res.Rows {
		r := &res.Rows[i]
		var line []string
		for _, a := range res.Query.Group {
			c := termsafe.String(cell(&r.Key, a)) // names from the network or a file: escaped, widths of the escaped text
			if c == "" && noneInTable(a) {
				c = "-"
			}
			line = append(line, c)
		}
		line = append(line, format.Count(r.Flows), format.Count(r.Packets), format.Count(r.RevPackets), format.Count(r.Packets+r.RevPackets),
			percent(r.Packets+r.RevPackets, tot.Packets+tot.RevPackets),
			format.Bytes(r.Bytes), format.Bytes(r.RevBytes), format.Bytes(r.Bytes+r.RevBytes), percent(r.Bytes+r.RevBytes, tot.Bytes+tot.RevBytes))
		if drops {
			line = append(line, format.Count(r.DropPackets), format.Bytes(r.DropBytes))
		}
		fmt.Fprintln(tw, strings.Join(line, "\t")+"\t")
	}
	total := make([]string, len(res.Query.Group)) // the label under the first attribute
	if len(total) > 0 {
		total[0] = "total"
	}
	total = append(total, format.Count(tot.Flows), format.Count(tot.Packets), format.Count(tot.RevPackets),
		format.Count(tot.Packets+tot.RevPackets), "", format.Bytes(tot.Bytes), format.Bytes(tot.RevBytes),
		format.Bytes(tot.Bytes+tot.RevBytes), "")
	if drops {
		total = append(total, format.Count(tot.DropPackets), format.Bytes(tot.DropBytes))
	}
	fmt.Fprintln(tw, strings.Join(total, "\t")+"\t")
	if err := tw.Flush(); err != nil {
		return err
	}
	st := &res.Stats
	if st.RowsScanned < st.RowsMatched { // an engine that reports no scan (ClickHouse): no block counts to give
		_, err := fmt.Fprintf(w, "\n%d of %d groups; %d rows matched; %v\n",
			len(res.Rows), st.Groups, st.RowsMatched, st.Elapsed.Round(time.Millisecond))
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d of %d groups; %d of %d rows matched; blocks: %d read, %d skipped by summaries, %d corrupt; %d live flows; %v\n",
		len(res.Rows), st.Groups, st.RowsMatched, st.RowsScanned, st.Blocks-st.BlocksSkipped-st.BlocksCorrupt,
		st.BlocksSkipped, st.BlocksCorrupt, st.LiveRecords, st.Elapsed.Round(time.Millisecond))
	return err
}

func percent(part, whole uint64) string {
	if whole == 0 {
		return "-"
	}
	return strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 2, 64)
}

// jsonRow is a row in the JSON and CSV output: exact numbers.
type jsonRow struct {
	Time    *time.Time `json:"time,omitempty"`
	Node    *string    `json:"node,omitempty"` // "" when not set
	Iface   *string    `json:"iface,omitempty"`
	SrcIP   *string    `json:"sip,omitempty"`
	DstIP   *string    `json:"dip,omitempty"`
	SrcPort *uint16    `json:"sport,omitempty"`
	DstPort *uint16    `json:"dport,omitempty"`
	Proto   *uint8     `json:"proto,omitempty"`
	Reason  *string    `json:"drop_reason,omitempty"`
	Samp    *uint32    `json:"sampling,omitempty"`
	// The NAT attributes: null for records not translated.
	NATSrcIP   json.RawMessage `json:"nat_src_ip,omitempty"`
	NATDstIP   json.RawMessage `json:"nat_dst_ip,omitempty"`
	NATSrcPort json.RawMessage `json:"nat_src_port,omitempty"`
	NATDstPort json.RawMessage `json:"nat_dst_port,omitempty"`
	Verdict    *string         `json:"verdict,omitempty"` // "" for none
	Rule       *string         `json:"rule,omitempty"`
	Mark       *uint32         `json:"ct_mark,omitempty"`
	Zone       *uint16         `json:"ct_zone,omitempty"`
	// The enrichment attributes: "" when not known.
	SrcWorkload     *string `json:"src_workload,omitempty"`
	SrcNamespace    *string `json:"src_namespace,omitempty"`
	SrcNode         *string `json:"src_node,omitempty"`
	DstWorkload     *string `json:"dst_workload,omitempty"`
	DstNamespace    *string `json:"dst_namespace,omitempty"`
	DstNode         *string `json:"dst_node,omitempty"`
	Service         *string `json:"service,omitempty"`
	ServiceBackends *string `json:"service_backends,omitempty"`
	ServiceGroup    *string `json:"service_group,omitempty"`
	ServiceMatch    *string `json:"service_match,omitempty"`
	jsonCounters
}

// jsonCounters are a row's or the totals' counters; the drop counters
// only when not 0 (as in weir's JSON records).
type jsonCounters struct {
	Flows       uint64 `json:"flows"`
	PacketsOut  uint64 `json:"packets_out"`
	PacketsIn   uint64 `json:"packets_in"`
	BytesOut    uint64 `json:"bytes_out"`
	BytesIn     uint64 `json:"bytes_in"`
	DropPackets uint64 `json:"drop_packets,omitempty"`
	DropBytes   uint64 `json:"drop_bytes,omitempty"`
}

func countersJSON(c *Counters) jsonCounters {
	return jsonCounters{c.Flows, c.Packets, c.RevPackets, c.Bytes, c.RevBytes, c.DropPackets, c.DropBytes}
}

func (res *Result) jsonRows() []jsonRow {
	out := make([]jsonRow, len(res.Rows))
	for i := range res.Rows {
		r, j := &res.Rows[i], &out[i]
		j.jsonCounters = countersJSON(&r.Counters)
		for _, a := range res.Query.Group {
			switch a {
			case AttrTime:
				j.Time = &r.Time
			case AttrNode:
				j.Node = &r.Node
			case AttrIface:
				j.Iface = &r.Iface
			case AttrSrcIP:
				s := r.SrcIP.String()
				j.SrcIP = &s
			case AttrDstIP:
				s := r.DstIP.String()
				j.DstIP = &s
			case AttrSrcPort:
				j.SrcPort = &r.SrcPort
			case AttrDstPort:
				j.DstPort = &r.DstPort
			case AttrProto:
				j.Proto = &r.Proto
			case AttrDropReason:
				j.Reason = &r.DropReason
			case AttrSampling:
				j.Samp = &r.Sampling
			case AttrNATSrcIP:
				j.NATSrcIP = natJSON(&r.Key, a)
			case AttrNATDstIP:
				j.NATDstIP = natJSON(&r.Key, a)
			case AttrNATSrcPort:
				j.NATSrcPort = natJSON(&r.Key, a)
			case AttrNATDstPort:
				j.NATDstPort = natJSON(&r.Key, a)
			case AttrVerdict:
				v := r.Verdict.String()
				j.Verdict = &v
			case AttrRule:
				j.Rule = &r.Rule
			case AttrMark:
				j.Mark = &r.Mark
			case AttrZone:
				j.Zone = &r.Zone
			case AttrSrcWorkload:
				j.SrcWorkload = &r.SrcWorkload
			case AttrSrcNamespace:
				j.SrcNamespace = &r.SrcNamespace
			case AttrSrcNode:
				j.SrcNode = &r.SrcNode
			case AttrDstWorkload:
				j.DstWorkload = &r.DstWorkload
			case AttrDstNamespace:
				j.DstNamespace = &r.DstNamespace
			case AttrDstNode:
				j.DstNode = &r.DstNode
			case AttrService:
				j.Service = &r.Service
			case AttrServiceBackends:
				j.ServiceBackends = &r.ServiceBackends
			case AttrServiceGroup:
				j.ServiceGroup = &r.ServiceGroup
			case AttrServiceMatch:
				m := r.ServiceMatch.String()
				j.ServiceMatch = &m
			}
		}
	}
	return out
}

// natJSON is NAT attribute a of k in JSON: a string address or a port
// number, null for records not translated.
func natJSON(k *Key, a Attr) json.RawMessage {
	c := cell(k, a)
	switch {
	case !k.NATed:
		return json.RawMessage("null")
	case a == AttrNATSrcIP || a == AttrNATDstIP:
		return json.RawMessage(strconv.Quote(c))
	}
	return json.RawMessage(c)
}

func (res *Result) writeJSON(w io.Writer) error {
	q := res.Query
	var group []string
	for _, a := range q.Group {
		group = append(group, a.String())
	}
	doc := struct {
		Query struct {
			Group     []string `json:"group"`
			Condition string   `json:"condition"`
			From      string   `json:"from,omitempty"`
			To        string   `json:"to,omitempty"`
			Ifaces    []string `json:"ifaces,omitempty"`
		} `json:"query"`
		Rows   []jsonRow    `json:"rows"`
		Totals jsonCounters `json:"totals"`
		Stats  struct {
			Stats
			ElapsedMS float64 `json:"elapsed_ms"`
		} `json:"stats"`
	}{Rows: res.jsonRows(), Totals: countersJSON(&res.Totals)}
	doc.Query.Group, doc.Query.Condition, doc.Query.Ifaces = group, q.Cond.String(), q.Ifaces
	if !q.From.IsZero() {
		doc.Query.From = q.From.UTC().Format(time.RFC3339Nano)
	}
	if !q.To.IsZero() {
		doc.Query.To = q.To.UTC().Format(time.RFC3339Nano)
	}
	doc.Stats.Stats = res.Stats
	doc.Stats.ElapsedMS = float64(res.Stats.Elapsed.Microseconds()) / 1000
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(&doc)
}

func (res *Result) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	var hdr []string
	for _, a := range res.Query.Group {
		hdr = append(hdr, a.String())
	}
	hdr = append(hdr, "flows", "packets_out", "packets_in", "bytes_out", "bytes_in")
	drops := res.showDrops()
	if drops {
		hdr = append(hdr, "drop_packets", "drop_bytes")
	}
	if err := cw.Write(hdr); err != nil {
		return err
	}
	for i := range res.Rows {
		r := &res.Rows[i]
		var line []string
		for _, a := range res.Query.Group {
			if a == AttrProto {
				line = append(line, strconv.Itoa(int(r.Proto))) // numbers in CSV: exact, sortable
				continue
			}
			line = append(line, cell(&r.Key, a))
		}
		u := strconv.FormatUint
		line = append(line, u(r.Flows, 10), u(r.Packets, 10), u(r.RevPackets, 10), u(r.Bytes, 10), u(r.RevBytes, 10))
		if drops {
			line = append(line, u(r.DropPackets, 10), u(r.DropBytes, 10))
		}
		if err := cw.Write(line); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
