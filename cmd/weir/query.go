package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/httpauth"
	"github.com/weir-dev/weir/internal/query"
	"github.com/weir-dev/weir/internal/store"
	"github.com/weir-dev/weir/internal/termsafe"
)

const queryExamples = `  # Top 10 talkers by bytes, all stored time
  weir query sip

  # Top 20 conversations of the last 24 hours to HTTPS, by packets received
  weir query -f -24h -n 20 -s packets:in talk_conv 'dport = 443'

  # Applications on eth0 between two times, as JSON
  weir query -i eth0 -f 2026-01-02T00:00:00Z -t 2026-01-03T00:00:00Z -o json apps_port

  # Bytes per 5 minutes from one network, not SSH, including flows still live
  weir query --resolution 5m --live time 'snet 10.0.0.0/8 and not port ssh'

  # What the kernel dropped (--source ebpf --ebpf-drops), by reason, then by
  # destination for one reason
  weir query -s drop_packets drop_reason 'drop_reason != ""'
  weir query -s drop_bytes dip,dport 'drop_reason = NO_SOCKET'

  # Conntrack: which backends a service address was translated to; deny
  # flows (NFLOG) by rule; flows not translated
  weir query dip,nat_dst_ip,nat_dst_port 'dip = 10.96.0.10'
  weir query verdict,rule,sip 'verdict = deny'
  weir query sip 'nat_dst_ip = ""'

  # What is stored: interfaces and time spans
  weir query --list
`

type queryOpts struct {
	dir, cond, from, to, sort, output, liveURL string
	liveToken, liveCA                          string
	ifaces                                     listFlag
	limit, workers                             int
	resolution                                 time.Duration
	ascending, list, live                      bool
}

func runQuery(args []string, stdout_, stderr io.Writer) int {
	var o queryOpts
	fs := newFlagSet("query", "weir query [flags] GROUP-BY [CONDITION...]",
		`Answer questions from the flow store: group the stored records by
attributes, filter them with a condition, rank the groups.

GROUP-BY is a comma-separated list of time, iface, sip, dip, sport, dport,
proto, drop_reason, sampling, nat_src_ip, nat_dst_ip, nat_src_port,
nat_dst_port, verdict, rule, ct_mark, ct_zone, src_workload, src_namespace,
src_node, dst_workload, dst_namespace, dst_node, service, service_backends,
service_group, service_match, or the presets talk_src (sip),
talk_dst (dip), talk_conv (sip,dip), apps_port (dport,proto) and raw.

CONDITION (the remaining arguments, or --condition) is a filter such as
  dport = 443 and not (snet 10.0.0.0/8 or host 2001:db8::1)
with and/or/not and parentheses; = != < > <= >=; attributes sip dip host net
snet dnet sport dport port proto iface vlan drop_reason sampling nat_src_ip
nat_dst_ip nat_src_port nat_dst_port verdict rule ct_mark ct_zone and the
enrichment attributes (= and != only); port and
protocol names (https, tcp). For host, net and port, != means neither side,
other operators either side. drop_reason is the kernel's name for the latest
drop (NO_SOCKET, NETFILTER_DROP; "" for none; any case); sampling is N for
1-in-N sampled records (0 or 1: unsampled). nat_* are the addresses and ports
after NAT (conntrack source): a record not translated has none ("-" in the
table, empty in CSV, null in JSON); nat_dst_ip = "" selects those records,
and only a negation ("not nat_dst_port = 80") matches them otherwise.
verdict is deny or "" (none), rule the NFLOG prefix (exact), ct_mark and
ct_zone the conntrack mark and zone. src_workload … service_match are what
enrichment (capture --enrich) labelled the record with: workload name,
namespace and node at each end, the service's name, backends and group, and
how the service was found (vip, nat, backend, ambiguous; "" for none);
"" selects records without the label.

A record counts when its start lies in [--from, --to). "out" counters are
what the initiator (sip) sent, "in" what it received. Packets and bytes the
kernel dropped (eBPF source with drops, both directions together) are shown
when the result has any or is sorted by them.`, queryExamples)
	fs.StringVar(&o.dir, "data-dir", defaultDataDir(), "the flow store `dir` to read (default $WEIR_DATA_DIR or ./weir-data)")
	fs.StringVar(&o.dir, "d", defaultDataDir(), "short for --data-dir")
	fs.Var(&o.ifaces, "iface", "only these interfaces (comma-separated or repeated; default all)")
	fs.Var(&o.ifaces, "i", "short for --iface")
	fs.StringVar(&o.cond, "condition", "", "filter `expression` (instead of trailing arguments)")
	fs.StringVar(&o.cond, "c", "", "short for --condition")
	fs.StringVar(&o.from, "from", "", "start `time`: RFC 3339, a date, Unix seconds, or relative (-24h, -7d); default: everything stored")
	fs.StringVar(&o.from, "f", "", "short for --from")
	fs.StringVar(&o.to, "to", "", "end `time` (exclusive), same forms; default: now and beyond")
	fs.StringVar(&o.to, "t", "", "short for --to")
	fs.IntVar(&o.limit, "limit", 10, "show the top `n` groups (per time bin when grouping by time); 0 shows all")
	fs.IntVar(&o.limit, "n", 10, "short for --limit")
	fs.StringVar(&o.sort, "sort", "bytes", "rank by bytes, packets or flows, optionally :in, :out or :sum (bytes:in), or by drop_packets or drop_bytes")
	fs.StringVar(&o.sort, "s", "bytes", "short for --sort")
	fs.BoolVar(&o.ascending, "ascending", false, "smallest first")
	fs.DurationVar(&o.resolution, "resolution", 0, "time bin width; implies grouping by time (default 5m when grouping by time)")
	fs.StringVar(&o.output, "output", "table", "output `format`: table, json or csv")
	fs.StringVar(&o.output, "o", "table", "short for --output")
	fs.BoolVar(&o.list, "list", false, "list the stored interfaces with their time spans, records and size")
	fs.BoolVar(&o.live, "live", false, "add what a running capture has not written out yet: flows in its tables and records awaiting the next writeout (from --live-url)")
	fs.StringVar(&o.liveURL, "live-url", query.DefaultLiveURL, "where the running capture serves its live flows (loopback only; https:// when it has --api-tls-cert)")
	fs.StringVar(&o.liveToken, "api-token-file", "", "with --live: send the bearer token in this `file` (the capture's --api-token-file)")
	fs.StringVar(&o.liveCA, "api-ca", "", "with --live and an https --live-url: trust the CA certificates in this PEM `file` (default: the system roots)")
	fs.IntVar(&o.workers, "workers", 0, "goroutines decoding blocks (default: one per CPU)")
	pos, done, code := parseInterleaved(fs, args, stdout_, stderr)
	if done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "weir query: "+format+"\n", a...)
		return exitUsage
	}
	outFmt, err := query.ParseFormat(o.output)
	if err != nil {
		return fail("%v", err)
	}
	st, err := store.OpenReadOnly(o.dir)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stderr, "weir query: no flow store at %s: run 'weir capture' first, or point --data-dir at one\n", o.dir)
		return exitFailure
	} else if err != nil {
		fmt.Fprintf(stderr, "weir query: %v\n", err)
		return exitFailure
	}
	defer st.Close()
	if !o.live && (o.liveToken != "" || o.liveCA != "") {
		return fail("--api-token-file and --api-ca go with --live")
	}
	if o.list {
		if len(pos) > 0 || o.cond != "" {
			return fail("--list takes no group-by or condition")
		}
		return listStore(st, o.ifaces, outFmt, stdout_, stderr)
	}

	q := &query.Query{Limit: o.limit, Ascending: o.ascending, Resolution: o.resolution, Workers: o.workers}
	if len(pos) == 0 {
		return fail("give the attributes to group by, e.g. 'weir query sip' or 'weir query talk_conv' (see --help)")
	}
	if q.Group, err = query.ParseGroupBy(pos[0]); err != nil {
		return syntaxFail(stderr, "group-by", err)
	}
	if o.resolution != 0 {
		if o.resolution < time.Second {
			return fail("--resolution must be at least 1s")
		}
		q.Group, _ = query.ParseGroupBy(pos[0] + ",time")
	}
	condText := o.cond
	if len(pos) > 1 {
		if condText != "" {
			return fail("give the condition either as arguments or with --condition, not both")
		}
		condText = strings.Join(pos[1:], " ")
	}
	if q.Cond, err = query.ParseCondition(condText); err != nil {
		return syntaxFail(stderr, "condition", err)
	}
	if q.Sort, q.Dir, err = query.ParseSort(o.sort); err != nil {
		return fail("--sort: %v", err)
	}
	if o.limit < 0 {
		return fail("--limit must not be negative")
	}
	now := time.Now()
	for _, t := range []struct {
		arg string
		dst *time.Time
		nm  string
	}{{o.from, &q.From, "--from"}, {o.to, &q.To, "--to"}} {
		if t.arg == "" {
			continue
		}
		if *t.dst, err = query.ParseTime(t.arg, now); err != nil {
			return fail("%s: %v", t.nm, err)
		}
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return fail("--from (%s) must be before --to (%s)", q.From.Format(time.RFC3339), q.To.Format(time.RFC3339))
	}
	for _, s := range o.ifaces {
		q.Ifaces = append(q.Ifaces, strings.Split(s, ",")...)
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	var liveRecs []flow.Record
	if o.live {
		var auth query.LiveAuth
		if o.liveToken != "" {
			tok, err := httpauth.LoadToken(o.liveToken)
			if err != nil {
				return fail("--api-token-file: %v", err)
			}
			auth.Token = string(tok)
		}
		if o.liveCA != "" {
			if auth.TLS, err = httpauth.ClientTLS(o.liveCA); err != nil {
				return fail("--api-ca: %v", err)
			}
		}
		fetch := func(ctx context.Context) ([]flow.Record, error) { return query.FetchLiveAuth(ctx, o.liveURL, auth) }
		if liveRecs, q.Blocks, err = query.LiveSnapshotFunc(ctx, st, fetch); err != nil {
			fmt.Fprintf(stderr, "weir query: --live: %v\n", err)
			return exitFailure
		}
	}
	res, err := query.Run(ctx, st, q, liveRecs)
	if err != nil {
		fmt.Fprintf(stderr, "weir query: %v\n", err)
		return exitFailure
	}
	if err := res.Write(stdout_, outFmt); err != nil {
		fmt.Fprintf(stderr, "weir query: %v\n", err)
		return exitFailure
	}
	if ss := st.Stats(); res.Stats.BlocksCorrupt > 0 || ss.CorruptBlocks > 0 || ss.CorruptIndexes > 0 {
		fmt.Fprintf(stderr, "weir query: %d damaged blocks were skipped; the answer leaves out their records ('weir store check' lists them)\n", max(res.Stats.BlocksCorrupt, int(ss.CorruptBlocks)))
		for _, w := range ss.Warnings {
			fmt.Fprintf(stderr, "weir query: %s\n", w)
		}
	}
	return exitOK
}

// syntaxFail prints a query-string mistake with a caret under it.
func syntaxFail(stderr io.Writer, what string, err error) int {
	var se *query.SyntaxError
	if errors.As(err, &se) {
		fmt.Fprintf(stderr, "weir query: %s: %s\n%s\n", what, se.Msg, se.Caret())
	} else {
		fmt.Fprintf(stderr, "weir query: %s: %v\n", what, err)
	}
	return exitUsage
}

// ifaceSpan is one line of --list.
type ifaceSpan struct {
	Iface  string    `json:"iface"`
	First  time.Time `json:"first"`
	Last   time.Time `json:"last"`
	Days   int       `json:"days"`
	Blocks int       `json:"blocks"`
	Flows  int64     `json:"flows"`
	Bytes  int64     `json:"bytes"`
}

func listStore(st *store.Store, only listFlag, outFmt query.Format, w, stderr io.Writer) int {
	names, err := st.Ifaces()
	if err != nil {
		fmt.Fprintf(stderr, "weir query: %v\n", err)
		return exitFailure
	}
	var want []string
	for _, s := range only {
		want = append(want, strings.Split(s, ",")...)
	}
	var spans []ifaceSpan
	for _, n := range names {
		if len(want) > 0 && !slices.Contains(want, n) {
			continue
		}
		bl, err := st.Blocks(0, 0, []string{n})
		if err != nil || len(bl) == 0 {
			continue
		}
		sp := ifaceSpan{Iface: n, First: time.Unix(0, bl[0].MinStart).UTC(), Last: time.Unix(0, bl[0].MaxEnd).UTC(), Blocks: len(bl)}
		days := map[string]bool{}
		for _, b := range bl {
			sp.First = minTime(sp.First, time.Unix(0, b.MinStart).UTC())
			if t := time.Unix(0, b.MaxEnd).UTC(); t.After(sp.Last) {
				sp.Last = t
			}
			sp.Flows += int64(b.Rows)
			sp.Bytes += int64(b.Size)
			days[b.Day] = true
		}
		sp.Days = len(days)
		spans = append(spans, sp)
	}
	switch outFmt {
	case query.JSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if spans == nil {
			spans = []ifaceSpan{}
		}
		err = enc.Encode(spans)
	case query.CSV:
		fmt.Fprintln(w, "iface,first,last,days,blocks,flows,bytes")
		for _, s := range spans {
			fmt.Fprintf(w, "%s,%s,%s,%d,%d,%d,%d\n", csvField(s.Iface), s.First.Format(time.RFC3339Nano), s.Last.Format(time.RFC3339Nano), s.Days, s.Blocks, s.Flows, s.Bytes)
		}
	default:
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "iface\tfirst\tlast\tdays\tblocks\tflows\tsize\t")
		for _, s := range spans {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t\n", termsafe.String(s.Iface), s.First.Format(time.RFC3339), s.Last.Format(time.RFC3339),
				s.Days, s.Blocks, format.Count(uint64(s.Flows)), format.Bytes(uint64(s.Bytes)))
		}
		err = tw.Flush()
	}
	if err != nil {
		fmt.Fprintf(stderr, "weir query: %v\n", err)
		return exitFailure
	}
	if ss := st.Stats(); ss.CorruptBlocks > 0 || ss.CorruptIndexes > 0 {
		fmt.Fprintf(stderr, "weir query: %d damaged blocks are left out of the list ('weir store check' lists them)\n", ss.CorruptBlocks)
		for _, w := range ss.Warnings {
			fmt.Fprintf(stderr, "weir query: %s\n", w)
		}
	}
	return exitOK
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// csvField quotes s when CSV needs it.
func csvField(s string) string {
	if strings.ContainsAny(s, ",\"\n\r") {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}
