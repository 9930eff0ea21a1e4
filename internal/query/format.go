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

	"github.com/weir-dev/weir/internal/iana"
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
	}
	return ""
}

func (res *Result) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var hdr []string
	for _, a := range res.Query.Group {
		hdr = append(hdr, a.String())
	}
	hdr = append(hdr, "flows", "pkts out", "pkts in", "pkts", "%", "bytes out", "bytes in", "bytes", "%")
	fmt.Fprintln(tw, strings.Join(hdr, "\t")+"\t")
	tot := res.Totals
	for i := range res.Rows {
		r := &res.Rows[i]
		var line []string
		for _, a := range res.Query.Group {
			line = append(line, cell(&r.Key, a))
		}
		line = append(line, count(r.Flows), count(r.Packets), count(r.RevPackets), count(r.Packets+r.RevPackets),
			percent(r.Packets+r.RevPackets, tot.Packets+tot.RevPackets),
			humanBytes(r.Bytes), humanBytes(r.RevBytes), humanBytes(r.Bytes+r.RevBytes), percent(r.Bytes+r.RevBytes, tot.Bytes+tot.RevBytes))
		fmt.Fprintln(tw, strings.Join(line, "\t")+"\t")
	}
	pad := make([]string, max(0, len(res.Query.Group)-1))
	fmt.Fprintln(tw, strings.Join(append(append([]string{"total"}[:min(1, len(res.Query.Group))], pad...),
		count(tot.Flows), count(tot.Packets), count(tot.RevPackets), count(tot.Packets+tot.RevPackets), "",
		humanBytes(tot.Bytes), humanBytes(tot.RevBytes), humanBytes(tot.Bytes+tot.RevBytes), ""), "\t")+"\t")
	if err := tw.Flush(); err != nil {
		return err
	}
	st := &res.Stats
	_, err := fmt.Fprintf(w, "\n%d of %d groups; %d of %d rows matched; blocks: %d read, %d skipped by summaries, %d corrupt; %d live flows; %v\n",
		len(res.Rows), st.Groups, st.RowsMatched, st.RowsScanned, st.Blocks-st.BlocksSkipped-st.BlocksCorrupt,
		st.BlocksSkipped, st.BlocksCorrupt, st.LiveRecords, st.Elapsed.Round(time.Millisecond))
	return err
}

// count renders a packet or flow count with an SI suffix above 10,000.
func count(n uint64) string {
	if n < 10000 {
		return strconv.FormatUint(n, 10)
	}
	return scaled(float64(n), 1000, []string{"", "k", "M", "G", "T", "P", "E"}, "")
}

// humanBytes renders a byte count in IEC units (KiB = 1024 B).
func humanBytes(n uint64) string {
	if n < 1024 {
		return strconv.FormatUint(n, 10) + " B"
	}
	return scaled(float64(n), 1024, []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}, " ")
}

func scaled(v, base float64, units []string, sep string) string {
	i := 0
	for v >= base && i < len(units)-1 {
		v /= base
		i++
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + sep + units[i]
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
	Iface   *string    `json:"iface,omitempty"`
	SrcIP   *string    `json:"sip,omitempty"`
	DstIP   *string    `json:"dip,omitempty"`
	SrcPort *uint16    `json:"sport,omitempty"`
	DstPort *uint16    `json:"dport,omitempty"`
	Proto   *uint8     `json:"proto,omitempty"`
	jsonCounters
}

type jsonCounters struct {
	Flows      uint64 `json:"flows"`
	PacketsOut uint64 `json:"packets_out"`
	PacketsIn  uint64 `json:"packets_in"`
	BytesOut   uint64 `json:"bytes_out"`
	BytesIn    uint64 `json:"bytes_in"`
}

func countersJSON(c *Counters) jsonCounters {
	return jsonCounters{c.Flows, c.Packets, c.RevPackets, c.Bytes, c.RevBytes}
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
			}
		}
	}
	return out
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
	if err := cw.Write(append(hdr, "flows", "packets_out", "packets_in", "bytes_out", "bytes_in")); err != nil {
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
		if err := cw.Write(append(line, u(r.Flows, 10), u(r.Packets, 10), u(r.RevPackets, 10), u(r.Bytes, 10), u(r.RevBytes, 10))); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
