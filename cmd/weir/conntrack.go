package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/weir-dev/weir/internal/caps"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/netdev"
	"github.com/weir-dev/weir/internal/sink"
	"github.com/weir-dev/weir/internal/source/conntrack"
	"github.com/weir-dev/weir/internal/source/nflog"
)

// ctOpts are the flags of the conntrack and NFLOG sources
// (weir capture --source conntrack | nflog).
type ctOpts struct {
	poll     time.Duration
	stale    time.Duration
	maxConns int
	zones    listFlag
	mark     string
	labels   listFlag
	noEvents bool
	groups   listFlag
	denyMax  int
}

func (c *ctOpts) flags(fs *flag.FlagSet) {
	fs.DurationVar(&c.poll, "ct-poll-interval", conntrack.DefaultPollInterval, "--source conntrack: dump the conntrack table this often and export what is due; events fill in between")
	fs.DurationVar(&c.stale, "ct-stale-timeout", conntrack.DefaultStaleTimeout, "--source conntrack: forget a connection no dump or event has seen for this long (reported idle)")
	fs.IntVar(&c.maxConns, "ct-max-conns", conntrack.DefaultMaxConns, "--source conntrack: connections held at most (preallocated, ~650 bytes each); a new one in a full store evicts the stalest (reason full, counted)")
	fs.Var(&c.zones, "ct-zone", "--source conntrack: keep only connections in conntrack zone `N`; repeatable")
	fs.StringVar(&c.mark, "ct-mark", "", "--source conntrack: keep only connections whose mark matches `value[/mask]` (hex 0x.. or decimal)")
	fs.Var(&c.labels, "ct-label", "--source conntrack: keep only connections with conntrack label bit `N` (0-127) set; repeatable (any of them)")
	fs.BoolVar(&c.noEvents, "ct-no-events", false, "--source conntrack: dumps only, no event stream (connections opened and closed between two polls are missed)")
	fs.Var(&c.groups, "nflog-group", "--source conntrack or nflog: read dropped packets logged to NFLOG group `N` (nft 'log group N drop') as deny flows; repeatable")
	fs.IntVar(&c.denyMax, "nflog-max-flows", nflog.DefaultMaxFlows, "--nflog-group: deny flows held at most per group; a full table exports the stalest (reason full)")
}

// isCTSource reports whether src is a source of this file.
func isCTSource(src string) bool { return src == "conntrack" || src == "nflog" }

// ctConflict names the flags that do not apply to the conntrack sources.
func ctConflict(fs *flag.FlagSet) string {
	var set []string
	fs.Visit(func(f *flag.Flag) {
		switch {
		case f.Name == "workers", f.Name == "filter", f.Name == "interval", f.Name == "end-linger", f.Name == "max-flows",
			strings.HasPrefix(f.Name, "ring-"), strings.HasPrefix(f.Name, "ebpf-"), f.Name == "sampling", f.Name == "sample-flows",
			f.Name == "interface":
			set = append(set, "--"+f.Name)
		case f.Name == "i":
			set = append(set, "-i")
		}
	})
	if len(set) == 0 {
		return ""
	}
	return strings.Join(set, ", ") + " do not apply to --source conntrack or nflog"
}

// ctOnly names the conntrack-source flags given with another source.
func ctOnly(fs *flag.FlagSet) string {
	var set []string
	fs.Visit(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "ct-") || strings.HasPrefix(f.Name, "nflog-") {
			set = append(set, "--"+f.Name)
		}
	})
	if len(set) == 0 {
		return ""
	}
	return strings.Join(set, ", ") + " need --source conntrack or nflog"
}

// parseUint parses a decimal or 0x-hex number of at most bits bits.
func parseUint(s string, bits int) (uint64, error) {
	return strconv.ParseUint(s, 0, bits)
}

// storeConfig builds the connection store's configuration from the flags.
func (c *ctOpts) storeConfig(o *captureOpts) (conntrack.StoreConfig, error) {
	cfg := conntrack.StoreConfig{MaxConns: c.maxConns, IdleTimeout: o.idle, ActiveTimeout: o.active, StaleTimeout: c.stale}
	if o.active == 0 {
		cfg.ActiveTimeout = 1<<63 - 1 // 0 disables, as for flows
	}
	if c.maxConns < 1 || c.poll <= 0 || c.stale <= 0 {
		return cfg, errors.New("--ct-max-conns must be at least 1, --ct-poll-interval and --ct-stale-timeout positive")
	}
	for _, z := range c.zones {
		for _, part := range strings.Split(z, ",") {
			v, err := parseUint(part, 16)
			if err != nil {
				return cfg, fmt.Errorf("--ct-zone %q: a zone is 0-65535", part)
			}
			cfg.Zones = append(cfg.Zones, uint16(v))
		}
	}
	if c.mark != "" {
		val, mask, hasMask := strings.Cut(c.mark, "/")
		v, err := parseUint(val, 32)
		m := uint64(0xffffffff)
		if err == nil && hasMask {
			m, err = parseUint(mask, 32)
		}
		if err != nil || m == 0 || v&^m != 0 {
			return cfg, fmt.Errorf("--ct-mark %q: want value[/mask] with a non-zero mask covering the value", c.mark)
		}
		cfg.Mark, cfg.MarkMask = uint32(v), uint32(m)
	}
	for _, l := range c.labels {
		v, err := parseUint(l, 8)
		if err != nil || v > 127 {
			return cfg, fmt.Errorf("--ct-label %q: a label bit is 0-127", l)
		}
		cfg.Labels[v/8] |= 1 << (v % 8)
	}
	return cfg, nil
}

// runConntrack runs the conntrack source (with any NFLOG groups), or the
// NFLOG source alone, until a signal or --duration.
func runConntrack(o *captureOpts, fs *flag.FlagSet, stderr io.Writer) int {
	l, c := &o.live, &o.live.ct
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "weir capture: "+format+"\n", a...)
		o.sinks.close()
		return exitUsage
	}
	if msg := ctConflict(fs); msg != "" {
		return fail("%s", msg)
	}
	storeCfg, err := c.storeConfig(o)
	if err != nil {
		return fail("%v", err)
	}
	var groups []uint16
	for _, g := range c.groups {
		for _, part := range strings.Split(g, ",") {
			v, err := parseUint(part, 16)
			if err != nil {
				return fail("--nflog-group %q: a group is 0-65535", part)
			}
			groups = append(groups, uint16(v))
		}
	}
	if l.ebpf.source == "nflog" && len(groups) == 0 {
		return fail("--source nflog needs --nflog-group N")
	}
	if l.ebpf.source == "nflog" && ctOnlyConntrack(fs) != "" {
		return fail("%s need --source conntrack", ctOnlyConntrack(fs))
	}
	if len(l.ebpf.netns) > 1 {
		return fail("--source %s reads one network namespace: give --netns at most once", l.ebpf.source)
	}
	var netns func(func() error) error
	if len(l.ebpf.netns) == 1 {
		path := netdev.NetnsPath(l.ebpf.netns[0])
		if _, err := os.Stat(path); err != nil {
			return fail("--netns: %v", err)
		}
		netns = func(fn func() error) error { return netdev.InNetns(path, fn) }
	}
	// Named as the kernel sees it: under ip netns exec, too.
	ns, nsErr := conntrack.IdentifyNetns(netns)
	if ns.Name == "" && len(l.ebpf.netns) == 1 {
		ns.Name = l.ebpf.netns[0]
	}
	nsName := ns.String()
	if nsErr != nil {
		nsName = fmt.Sprintf("this namespace (%v)", nsErr)
	}
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "weir capture: "+format+"\n", args...) }
	life := newLifecycle(l.duration)
	defer life.Close()
	out, queues := o.sinks.queued(l.queueDepth, false, life.stop)
	var ct *conntrack.Source
	var nl *nflog.Source
	closeAll := func() {
		if ct != nil {
			ct.Close()
		}
		if nl != nil {
			nl.Close()
		}
	}
	var cols []metrics.Collector
	if l.ebpf.source == "conntrack" {
		ct, err = conntrack.NewSource(conntrack.SourceConfig{Netns: netns, PollInterval: c.poll, NoEvents: c.noEvents,
			Store: storeCfg, Logf: logf}, out.Write)
		if err != nil {
			out.Close()
			return ctPrivilege(stderr, err)
		}
		cols = append(cols, conntrack.Collector(ct.Stats, c.maxConns))
	}
	if len(groups) > 0 {
		active := o.active
		if active == 0 {
			active = -1 // --active-timeout 0: never
		}
		nl, err = nflog.NewSource(nflog.SourceConfig{Netns: netns, Groups: groups, MaxFlows: c.denyMax,
			IdleTimeout: o.idle, ActiveTimeout: active, Logf: logf}, out.Write)
		if err != nil {
			closeAll()
			out.Close()
			if errors.Is(err, syscall.EBUSY) {
				fmt.Fprintf(stderr, "weir capture: %v (another program reads that NFLOG group: ulogd, another weir?)\n", err)
				return exitFailure
			}
			return ctPrivilege(stderr, err)
		}
		cols = append(cols, nflog.Collector(nl.Stats))
	}
	defer closeAll()
	cols = append(cols, metrics.NewGoCollector(), metrics.NewProcessCollector(), sink.QueueCollector(queues...))
	srv, code := o.serveMetrics(stderr, cols)
	if code != exitOK {
		out.Close()
		return code
	}
	if srv != nil {
		defer srv.Close()
	}
	var keep caps.Set
	why := "nothing more is opened"
	if ct != nil {
		keep, why = caps.Of(caps.NetAdmin), "the kernel checks every conntrack dump request"
	}
	if netns != nil {
		keep |= caps.Of(caps.SysAdmin)
		why += "; cap_sys_admin to enter " + nsName + " again"
	}
	l.priv.dropCaps(stderr, "capture", keep, why, o.sinks.needs()...)
	ctx, cancel := context.WithCancel(life.ctx)
	defer cancel()
	var what []string
	if ct != nil {
		ev := "with events"
		if c.noEvents {
			ev = "without events"
		}
		what = append(what, fmt.Sprintf("conntrack table of %s every %s %s (up to %s connections)", nsName, c.poll, ev, format.Count(uint64(c.maxConns))))
	}
	if nl != nil {
		what = append(what, fmt.Sprintf("NFLOG groups %s of %s", strings.Join(c.groups, ","), nsName))
	}
	fmt.Fprintf(stderr, "weir capture: reading the %s\n", strings.Join(what, "; and "))
	errs := make(chan error, 2)
	n := 0
	if ct != nil {
		n++
		go func() { errs <- ct.Run(ctx) }()
	}
	if nl != nil {
		n++
		go func() { errs <- nl.Run(ctx) }()
	}
	var runErr error
	for range n {
		if err := <-errs; err != nil && runErr == nil {
			runErr = err
			cancel() // one source failed: stop the other, flushing it
		}
	}
	closeErr := out.Close()
	if o.stats {
		printCTStats(stderr, ct, nl, queues)
		o.sinks.printStats(stderr)
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "weir capture: %v\n", runErr)
		return exitFailure
	}
	if closeErr != nil {
		fmt.Fprintf(stderr, "weir capture: %v\n", closeErr)
		return exitFailure
	}
	return exitOK
}

// ctOnlyConntrack names the flags that only the conntrack table uses.
func ctOnlyConntrack(fs *flag.FlagSet) string {
	var set []string
	fs.Visit(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "ct-") {
			set = append(set, "--"+f.Name)
		}
	})
	return strings.Join(set, ", ")
}

// ctPrivilege explains a permission error and returns exitFailure.
func ctPrivilege(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "weir capture: %v\n", err)
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		fmt.Fprintf(stderr, "weir capture: reading conntrack and NFLOG needs root or CAP_NET_ADMIN\n")
	}
	return exitFailure
}

// printCTStats prints the conntrack and NFLOG sources' counters.
func printCTStats(w io.Writer, ct *conntrack.Source, nl *nflog.Source, queues []*sink.Queue) {
	n := format.Count
	if ct != nil {
		st := ct.Stats()
		fmt.Fprintf(w, "conntrack   %s polls (%s failed, %s early after lost events), last %s; %s dump messages, %s events, %s rejected\n",
			n(st.Polls), n(st.PollErrors), n(st.Resyncs), st.PollTime.Round(time.Microsecond),
			n(st.Dump.Messages), n(st.Events.Messages), n(st.Dump.Rejected+st.Events.Rejected))
		s := st.Store
		var parts []string
		for r := conntrack.ExportReason(0); r < conntrack.NumExportReasons; r++ {
			parts = append(parts, fmt.Sprintf("%s %s", r, n(s.Exported[r])))
		}
		fmt.Fprintf(w, "connections %s held, %s new, %s evicted (%s records lost), %s counter resets, %s filtered; records: %s\n",
			n(uint64(s.Conns)), n(s.New), n(s.Evicted), n(s.EvictedUnexported), n(s.CounterResets), n(s.Filtered), strings.Join(parts, ", "))
		fmt.Fprintf(w, "ended       %s gone from a dump before their destroy event; forgotten past --ct-max-conns/4 remembered: %s live, %s ended (counted again if seen)\n",
			n(s.Vanished), n(s.Forgotten), n(s.ForgottenEnded))
		if st.Untracked {
			fmt.Fprintf(w, "conntrack   %s\n", conntrack.UntrackedHelp(ct.Namespace(), st.UntrackedPackets, st.UntrackedEstablished))
		}
	}
	if nl != nil {
		for _, g := range nl.Stats() {
			var bad uint64
			for _, e := range g.Aggregator.Errors {
				bad += e
			}
			fmt.Fprintf(w, "nflog       group %d: %s packets in %s deny-flow records, %s rejected, %s lost (gaps %s, overruns %s)\n",
				g.Group, n(g.Aggregator.Packets), n(g.Exported), n(bad), n(g.Aggregator.SeqGaps+g.Socket.ENOBUFS), n(g.Aggregator.SeqGaps), n(g.Socket.ENOBUFS))
		}
	}
	printQueueStats(w, queues)
	fmt.Fprintf(w, "memory      RSS %s now, max %s\n", format.Bytes(rssNow()), format.Bytes(maxRSS()))
}
