package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/weir-dev/weir/internal/caps"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/netdev"
	"github.com/weir-dev/weir/internal/sink"
	"github.com/weir-dev/weir/internal/source/ebpf"
)

// ebpfOpts are the flags of the eBPF source (weir capture --source ebpf).
type ebpfOpts struct {
	source      string
	maxFlows    int
	evict       time.Duration
	ringSize    sizeFlag
	noRing      bool
	sampling    int
	sampleFlows bool
	drops       bool
	attach      string
	netns       listFlag
	fs          *flag.FlagSet
}

func (e *ebpfOpts) flags(fs *flag.FlagSet) {
	e.fs = fs
	e.ringSize = ebpf.DefaultRingSize
	fs.StringVar(&e.source, "source", "afpacket", "live `source`: afpacket (packet rings, decoded in user space), ebpf (TCX programs aggregate flows in the kernel), conntrack (the kernel's connection tracking table, with NAT; no -i) or nflog (packets firewall rules log and drop, as deny flows; no -i)")
	fs.IntVar(&e.maxFlows, "ebpf-max-flows", ebpf.DefaultMaxFlows, "--source ebpf: entries of each of the two kernel flow maps (flows between two drains; more overflow to the ring); also the flow table's size unless --max-flows is given")
	fs.DurationVar(&e.evict, "ebpf-evict-interval", ebpf.DefaultEvictInterval, "--source ebpf: drain the kernel flow map this often (it must be shorter than --idle-timeout)")
	fs.Var(&e.ringSize, "ebpf-ring-size", "--source ebpf: overflow ring `size` (power of two: 256KiB, 1MiB, 4MiB) for packets the map has no room for")
	fs.BoolVar(&e.noRing, "ebpf-no-ring", false, "--source ebpf: no overflow ring; packets the full map cannot take are only counted (weir_ebpf_lost_packets_total)")
	fs.IntVar(&e.sampling, "sampling", 1, "--source ebpf: count 1 packet in `N`, chosen by a hash of its content (alike at every interface)")
	fs.BoolVar(&e.sampleFlows, "sample-flows", false, "--source ebpf: with --sampling, choose whole flows (both directions) by hash instead of packets")
	fs.StringVar(&e.attach, "ebpf-attach", "auto", "--source ebpf: attach the programs with `mode` tcx (TCX links), tc (clsact qdisc filters) or auto (TCX where the kernel has it, else tc)")
	fs.BoolVar(&e.drops, "ebpf-drops", false, "--source ebpf: also attribute packets the kernel drops (skb:kfree_skb) to their flows, with the drop reason (drop_packets, drop_bytes, drop_reason in records)")
	fs.Var(&e.netns, "netns", "--source ebpf: also watch the -i interfaces of the network namespace `name` (/run/netns/name, or a path); repeatable. Its interfaces are named name/iface in records")
}

// afpacketConflict names the eBPF flags given without --source ebpf.
func (e *ebpfOpts) afpacketConflict() string {
	var set []string
	e.fs.Visit(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "ebpf-") || f.Name == "sampling" || f.Name == "sample-flows" || f.Name == "netns" {
			set = append(set, "--"+f.Name)
		}
	})
	if len(set) == 0 {
		return ""
	}
	return strings.Join(set, ", ") + " need --source ebpf"
}

// ebpfConflict names the AF_PACKET-only flags given with --source ebpf.
func (e *ebpfOpts) ebpfConflict() string {
	var set []string
	e.fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "workers", "filter", "ring-block-size", "ring-blocks", "interval":
			set = append(set, "--"+f.Name)
		}
	})
	if len(set) == 0 {
		return ""
	}
	return strings.Join(set, ", ") + " do not apply to --source ebpf"
}

// runEBPF runs the eBPF source until a signal or --duration.
func runEBPF(o *captureOpts, sel *netdev.Selector, stderr io.Writer) int {
	l, e := &o.live, &o.live.ebpf
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "weir capture: "+format+"\n", a...)
		o.sinks.close()
		return exitUsage
	}
	if msg := e.ebpfConflict(); msg != "" {
		return fail("%s", msg)
	}
	if e.maxFlows < 1 || e.evict <= 0 || e.sampling < 1 {
		return fail("--ebpf-max-flows and --sampling must be at least 1, --ebpf-evict-interval positive")
	}
	cfg := ebpf.Config{
		Select:        sel,
		MaxFlows:      e.maxFlows,
		EvictInterval: e.evict,
		Table:         flow.Config{MaxFlows: o.maxFlows, IdleTimeout: o.idle, ActiveTimeout: o.active, EndLinger: o.linger},
		Sampling:      e.sampling,
		SampleFlows:   e.sampleFlows,
		RingSize:      int(e.ringSize),
		Drops:         e.drops,
		Attach:        ebpf.AttachMode(strings.TrimPrefix(e.attach, "auto")),
		Logf: func(format string, args ...any) {
			fmt.Fprintf(stderr, "weir capture: "+format+"\n", args...)
		},
	}
	if e.noRing {
		cfg.RingSize = -1
	}
	if len(e.netns) > 0 {
		cfg.Netns = []ebpf.Netns{{Do: func(fn func() error) error { return fn() }}}
		for _, n := range e.netns {
			path := netdev.NetnsPath(n)
			cfg.Netns = append(cfg.Netns, ebpf.Netns{Name: n, Do: func(fn func() error) error { return netdev.InNetns(path, fn) }})
		}
	}
	maxFlowsSet := false
	e.fs.Visit(func(f *flag.Flag) { maxFlowsSet = maxFlowsSet || f.Name == "max-flows" })
	if !maxFlowsSet { // the table holds what the kernel map holds; --max-flows overrides
		cfg.Table.MaxFlows = e.maxFlows
	}
	life := newLifecycle(l.duration)
	defer life.Close()
	out, queues := o.sinks.queued(l.queueDepth, false, life.stop)
	src, err := ebpf.New(cfg, out)
	if err != nil {
		out.Close()
		fmt.Fprintf(stderr, "weir capture: %v\n", err)
		if errors.Is(err, ebpf.ErrConfig) {
			return exitUsage
		}
		return ebpfPrivilege(stderr, err)
	}
	// Loading parsed the kernel's BTF (for CO-RE): tens of MB that are
	// garbage now. Hand them back before the table's pages are touched.
	debug.FreeOSMemory()
	srv, code := o.serveMetrics(stderr, []metrics.Collector{metrics.NewGoCollector(), metrics.NewProcessCollector(), ebpf.Collector(src.Stats), sink.QueueCollector(queues...)})
	if code != exitOK {
		src.Close()
		out.Close()
		return code
	}
	if srv != nil {
		defer srv.Close()
	}
	l.priv.dropCaps(stderr, "capture", e.keep(), "to attach to interfaces that appear later", o.sinks.needs()...)
	ctx, cancel := context.WithCancel(life.ctx)
	defer cancel()
	go func() { // say when attached
		for t := time.NewTicker(20 * time.Millisecond); ctx.Err() == nil; <-t.C {
			if n := src.Stats().Ifaces; n > 0 {
				fmt.Fprintf(stderr, "weir capture: eBPF programs on %d interfaces matching %s; kernel maps of %s flows, drained every %s\n",
					n, sel, format.Count(uint64(e.maxFlows)), e.evict)
				t.Stop()
				return
			}
		}
	}()
	runErr := src.Run(ctx)
	cancel()
	closeErr := out.Close()
	if o.stats {
		st := src.Stats()
		printEBPFStats(stderr, &st, queues)
		o.sinks.printStats(stderr)
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "weir capture: %v\n", runErr)
		return ebpfPrivilege(stderr, runErr)
	}
	if closeErr != nil {
		fmt.Fprintf(stderr, "weir capture: %v\n", closeErr)
		return exitFailure
	}
	return exitOK
}

// keep is what the eBPF source still needs once its programs are loaded
// (see privileges.go): with TCX (Linux 6.6+) attaching the loaded programs
// to new interfaces and draining the maps need no capability; older
// kernels need CAP_BPF for every bpf() command, CAP_NET_ADMIN for clsact
// filters and CAP_PERFMON for the drop tracepoint; --netns needs
// CAP_SYS_ADMIN to enter the namespaces again.
func (e *ebpfOpts) keep() caps.Set {
	var k caps.Set
	if !kernelAtLeast(6, 6) || e.attach == "tc" {
		k |= caps.Of(caps.BPF, caps.NetAdmin)
		if e.drops {
			k |= caps.Of(caps.Perfmon)
		}
	}
	if len(e.netns) > 0 {
		k |= caps.Of(caps.SysAdmin)
	}
	return k
}

// ebpfPrivilege explains a permission error and returns exitFailure.
func ebpfPrivilege(stderr io.Writer, err error) int {
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		fmt.Fprintf(stderr, "weir capture: the eBPF source needs root or CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON\n")
	}
	return exitFailure
}

// printEBPFStats prints the eBPF source's counters.
func printEBPFStats(w io.Writer, st *ebpf.Stats, queues []*sink.Queue) {
	n := format.Count
	fmt.Fprintf(w, "ebpf        %d interfaces; %s packets, %s duplicates, %s not IP, %s sampled out\n",
		st.Ifaces, n(st.Packets), n(st.Duplicates), n(st.NotIP), n(st.SampledOut))
	fmt.Fprintf(w, "kernel map  %s entries of %s now; %s inserts; full: %s packets (ENOMEM %s, other %s)\n",
		n(st.Occupancy()), n(uint64(st.Capacity)), n(st.MapInserts), n(st.InsertE2BIG), n(st.InsertENOMEM), n(st.InsertOther))
	fmt.Fprintf(w, "overflow    %s packets through the ring, %s read, %s lost\n", n(st.Ring), n(st.RingRead), n(st.Lost))
	for src := range ebpf.NumSources {
		var parts []string
		for r := range ebpf.NumReasons {
			parts = append(parts, fmt.Sprintf("%s %s (%s flows)", ebpf.ReasonNames[r], n(st.Evictions[src][r]), n(st.Evicted[src][r])))
		}
		fmt.Fprintf(w, "drains      %-8s %s\n", ebpf.SourceNames[src], strings.Join(parts, ", "))
	}
	var drains uint64
	for _, c := range st.EvictHist {
		drains += c
	}
	if drains > 0 {
		fmt.Fprintf(w, "drain time  %s total, %s mean, %s last; batch deletes %v\n",
			st.EvictTime.Round(time.Microsecond), (st.EvictTime / time.Duration(drains)).Round(time.Microsecond), st.EvictLast.Round(time.Microsecond), st.BatchDeletes)
	}
	fmt.Fprintf(w, "fragments   %s first, %s attributed, %s unattributed\n", n(st.FragFirst), n(st.FragFound), n(st.FragMissing))
	if st.DropReasons != nil {
		parts := []string{}
		if len(st.DropReasons) == 0 {
			parts = append(parts, "none")
		}
		for _, r := range slices.Sorted(maps.Keys(st.DropReasons)) {
			parts = append(parts, fmt.Sprintf("%s %s", r, n(st.DropReasons[r])))
		}
		fmt.Fprintf(w, "drops       %s on flows, %s not (map full %s, unkeyed %s); by reason: %s\n",
			n(st.Drops), n(st.DropsLost+st.DropsUnkeyed), n(st.DropsLost), n(st.DropsUnkeyed), strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "records     %s\n", n(st.Records))
	printQueueStats(w, queues)
	fmt.Fprintf(w, "memory      RSS %s now, max %s\n", format.Bytes(rssNow()), format.Bytes(maxRSS()))
}

// rssNow is the process's resident set now (0 where /proc is missing).
func rssNow() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}
