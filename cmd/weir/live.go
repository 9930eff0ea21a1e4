package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weir-dev/weir/internal/caps"
	"github.com/weir-dev/weir/internal/cli"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/netdev"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/pcapfilter"
	"github.com/weir-dev/weir/internal/sink"
	"github.com/weir-dev/weir/internal/source/afpacket"
	"github.com/weir-dev/weir/internal/termsafe"
)

// liveOpts are the flags of live capture.
type liveOpts struct {
	ifaces     listFlag
	workers    int
	filter     string
	blockSize  sizeFlag
	blocks     int
	http       httpOpts
	priv       privOpts
	interval   time.Duration
	duration   time.Duration
	queueDepth int
	cpuProfile string
	ebpf       ebpfOpts
	ct         ctOpts
}

func (l *liveOpts) flags(fs *flag.FlagSet) {
	l.blockSize = afpacket.DefaultBlockSize
	fs.Var(&l.ifaces, "interface", "capture live on `iface`: a name, a comma-separated list, 'any' (every up interface but loopback) or /regex/; repeatable")
	fs.Var(&l.ifaces, "i", "short for --interface `iface`")
	fs.IntVar(&l.workers, "workers", 1, "live capture goroutines, each with its own ring per interface (PACKET_FANOUT by flow hash) and its own flow table shard")
	fs.StringVar(&l.filter, "filter", "", "tcpdump-syntax `expression` run in the kernel before the ring (for example 'tcp port 443 or udp')")
	fs.Var(&l.blockSize, "ring-block-size", "ring block `size` per socket (power of two: 256KiB, 1MiB, 4MiB)")
	fs.IntVar(&l.blocks, "ring-blocks", afpacket.DefaultNumBlocks, "ring blocks per socket (ring memory per interface = workers × blocks × block size)")
	l.priv.flags(fs)
	l.http.flags(fs, "127.0.0.1:9464", "Prometheus metrics (/metrics) and, with -i, the live flows (/flows/live, what 'weir query --live' reads)")
	fs.DurationVar(&l.interval, "interval", 5*time.Second, "with --output=table: print the top live flows this often (0: only at exit)")
	fs.DurationVar(&l.duration, "duration", 0, "stop live capture after this long, as on SIGTERM (0: run until interrupted)")
	fs.StringVar(&l.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the capture to `file` (for go tool pprof)")
	fs.IntVar(&l.queueDepth, "queue-depth", 256, "batches of 1024 records queued per sink; a slow sink drops (and counts) beyond this")
	l.ebpf.flags(fs)
	l.ct.flags(fs)
}

// set reports whether any live-only flag was given.
func (l *liveOpts) set(fs *flag.FlagSet) bool {
	any := false
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "workers", "filter", "cpuprofile", "ring-block-size", "ring-blocks", "interval", "duration", "queue-depth",
			"source", "ebpf-max-flows", "ebpf-evict-interval", "ebpf-ring-size", "sampling", "sample-flows", "netns", "drop-privileges":
			any = true
		}
		any = any || slices.Contains(httpFlags, f.Name)
	})
	return any
}

// listFlag collects repeated flag values (a list in a --config file).
type listFlag = cli.List

// sizeFlag is a byte count written as 4096, 256KiB, 1MiB or 1GiB.
type sizeFlag int

// String is the size as Set reads it (1MiB, 65536): a --config example
// of the default loads.
func (s *sizeFlag) String() string {
	for _, u := range []struct {
		sh   uint
		name string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n := int(*s); n != 0 && n%(1<<u.sh) == 0 {
			return strconv.Itoa(n>>u.sh) + u.name
		}
	}
	return strconv.Itoa(int(*s))
}
func (s *sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	*s = sizeFlag(n)
	return err
}

func parseSize(v string) (int, error) {
	n, err := parseBytes(v, 1<<30)
	return int(n), err
}

// parseBytes parses a byte count with an optional binary unit (K/KiB,
// M/MiB, G/GiB, T/TiB), positive and at most limit.
func parseBytes(v string, limit int64) (int64, error) {
	mult := int64(1)
	num := v
	for _, u := range []struct {
		suf string
		m   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}} {
		if strings.HasSuffix(v, u.suf) {
			num, mult = strings.TrimSuffix(v, u.suf), u.m
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > limit/mult {
		return 0, fmt.Errorf("%q is not a size up to %s (examples: 65536, 256KiB, 1MiB, 20GiB)", v, format.Bytes(uint64(limit)))
	}
	return n * mult, nil
}

// filterCache compiles the filter once per link type.
type filterCache struct {
	expr string
	mu   sync.Mutex
	prog map[pcapfilter.LinkType][]afpacket.Instruction
}

func (f *filterCache) forLink(l netdev.Link) ([]afpacket.Instruction, error) {
	lt := pcapfilter.LinkEthernet
	switch l.Type {
	case 65534, 519: // ARPHRD_NONE (tun, wireguard), ARPHRD_RAWIP: frames start at the IP header
		lt = pcapfilter.LinkRaw
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.prog[lt]; ok {
		return p, nil
	}
	insns, err := pcapfilter.Compile(f.expr, lt, 0)
	if err != nil {
		return nil, err
	}
	prog := make([]afpacket.Instruction, len(insns))
	for i, in := range insns {
		prog[i] = afpacket.Instruction{Op: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	f.prog[lt] = prog
	return prog, nil
}

// runLive runs live capture until a signal or --duration.
func runLive(o *captureOpts, stdout_, stderr io.Writer) int {
	l := &o.live
	var out sink.Sink // the queued sinks, once made
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "weir capture: "+format+"\n", a...)
		if out == nil {
			o.sinks.close()
		}
		return exitUsage
	}
	sel, err := netdev.ParseSelector(l.ifaces)
	if err != nil {
		return fail("-i: %v", err)
	}
	if l.workers < 1 || l.workers > afpacket.MaxWorkers {
		return fail("--workers must be 1..%d, got %d", afpacket.MaxWorkers, l.workers)
	}
	if l.duration < 0 || l.interval < 0 || l.queueDepth < 1 {
		return fail("--duration and --interval must not be negative, --queue-depth at least 1")
	}
	switch l.ebpf.source {
	case "ebpf":
		return runEBPF(o, sel, stderr)
	case "afpacket":
		if msg := l.ebpf.afpacketConflict(); msg != "" {
			return fail("%s", msg)
		}
	default:
		return fail("--source must be afpacket, ebpf, conntrack or nflog, got %q", l.ebpf.source)
	}
	cfg := afpacket.Config{
		Select:  sel,
		Workers: l.workers,
		Ring:    afpacket.RingConfig{BlockSize: int(l.blockSize), NumBlocks: l.blocks},
		Table:   flow.Config{MaxFlows: o.maxFlows, IdleTimeout: o.idle, ActiveTimeout: o.active, EndLinger: o.linger},
		Decoder: packet.Config{Decap: o.decap},
		Logf: func(format string, args ...any) {
			fmt.Fprintf(stderr, "weir capture: "+format+"\n", args...)
		},
		Ready: func(names []string) {
			for i := range names {
				names[i] = termsafe.String(names[i])
			}
			fmt.Fprintf(stderr, "weir capture: listening on %d interfaces (%s) matching %s, %d workers\n",
				len(names), strings.Join(names, ", "), sel, l.workers)
			// The first rings are open: from now on only interfaces that
			// appear later need a new socket.
			l.priv.dropCaps(stderr, "capture", caps.Of(caps.NetRaw), "to open the rings of interfaces that appear later", o.sinks.needs()...)
		},
	}
	if l.filter != "" {
		fc := &filterCache{expr: l.filter, prog: map[pcapfilter.LinkType][]afpacket.Instruction{}}
		if _, err := pcapfilter.Compile(l.filter, pcapfilter.LinkEthernet, 0); err != nil {
			return fail("--filter: %v", err)
		}
		cfg.Filter = fc.forLink
	}
	if _, err := (afpacket.RingConfig{Iface: "x", BlockSize: int(l.blockSize), NumBlocks: l.blocks}).Validate(); err != nil {
		return fail("%v", err)
	}

	life := newLifecycle(l.duration)
	defer life.Close()
	out, queues := o.sinks.queued(l.queueDepth, false, life.stop)
	c, err := afpacket.New(cfg, out)
	if err != nil {
		out.Close()
		return fail("%v", err)
	}
	var pending []func(func(*flow.Record))
	if o.sinks.st != nil {
		pending = append(pending, o.sinks.st.Pending) // evicted, not yet written out
	}
	srv, code := o.serveMetrics(stderr, []metrics.Collector{metrics.NewGoCollector(), metrics.NewProcessCollector(), c.Collector(queues...)},
		metrics.Route{Pattern: "GET /flows/live", Handler: c.FlowsHandler(pending...)})
	if code != exitOK {
		out.Close()
		return code
	}
	if srv != nil {
		defer srv.Close()
	}
	ctx, cancel := context.WithCancel(life.ctx)
	defer cancel()
	var views sync.WaitGroup
	if o.sinks.output == "table" && l.interval > 0 {
		views.Add(1)
		go func() { defer views.Done(); liveViews(ctx, c, o.sinks.top, l.interval, stdout_) }()
	}
	if l.cpuProfile != "" {
		f, err := os.Create(l.cpuProfile)
		if err != nil {
			return fail("--cpuprofile: %v", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail("--cpuprofile: %v", err)
		}
		defer pprof.StopCPUProfile()
	}
	runErr := c.Run(ctx)
	cancel()
	views.Wait()
	closeErr := out.Close()
	st := c.Stats()
	if o.stats {
		printLiveStats(stderr, &st, queues)
		o.sinks.printStats(stderr)
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "weir capture: %v\n", runErr)
		if errors.Is(runErr, syscall.EPERM) || errors.Is(runErr, syscall.EACCES) {
			fmt.Fprintf(stderr, "weir capture: live capture needs root or the capabilities CAP_NET_RAW and CAP_NET_ADMIN:\n"+
				"  run it with sudo, or once: sudo setcap cap_net_raw,cap_net_admin=eip %s\n", os.Args[0])
		}
		return exitFailure
	}
	if closeErr != nil {
		fmt.Fprintf(stderr, "weir capture: %v\n", closeErr)
		return exitFailure
	}
	return exitOK
}

// liveViews prints the top live flows every interval until ctx ends.
func liveViews(ctx context.Context, c *afpacket.Capture, top int, every time.Duration, w io.Writer) {
	if top <= 0 {
		top = 20
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			tctx, cancel := context.WithTimeout(ctx, every)
			recs, err := c.Top(tctx, top)
			cancel()
			if err != nil {
				continue
			}
			st := c.Stats()
			var pkts, drops uint64
			open := 0
			for _, f := range st.Ifaces {
				pkts += f.Packets
				drops += f.Kernel.Drops
				if f.Open {
					open++
				}
			}
			title := fmt.Sprintf("%s  %s flows live on %d interfaces; %s packets, %s kernel drops since start",
				now.UTC().Format(time.RFC3339), format.Count(uint64(st.Flows)), open, format.Count(pkts), format.Count(drops))
			_ = format.WriteFlows(w, title, recs)
		}
	}
}

// printLiveStats prints a live capture's counters.
func printLiveStats(w io.Writer, st *afpacket.Stats, queues []*sink.Queue) {
	n := format.Count
	fmt.Fprintf(w, "interfaces  %d opened, %d released, %d failed to open\n", st.Opened, st.Released, st.OpenFails)
	for _, f := range st.Ifaces {
		fmt.Fprintf(w, "  %-15s %s packets, %s; kernel: %s received, %s dropped, %s ring freezes\n",
			termsafe.String(f.Name), n(f.Packets), format.Bytes(f.Bytes), n(f.Kernel.Packets), n(f.Kernel.Drops), n(f.Kernel.FreezeQueue))
	}
	printCounters(w, &st.Decoder, &st.Table, st.Records)
	fmt.Fprintf(w, "duplicates  %s (copies of packets already counted at another interface)\n", n(st.Table.Duplicates))
	printQueueStats(w, queues)
	fmt.Fprintf(w, "memory      %d workers, tables %s for %s flows; max RSS %s\n",
		st.Workers, format.Bytes(uint64(st.TableMem)), n(uint64(st.TableCap)), format.Bytes(maxRSS()))
}
