package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/agent"
	"github.com/weir-dev/weir/internal/caps"
	"github.com/weir-dev/weir/internal/cli"
	"github.com/weir-dev/weir/internal/netdev"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source/afpacket"
	"github.com/weir-dev/weir/internal/termsafe"
)

// liveOpts are the flags of live capture.
type liveOpts struct {
	ifaces     listFlag
	source     string
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
	netns      listFlag
	ebpf       ebpfOpts
	ct         ctOpts
}

func (l *liveOpts) flags(fs *flag.FlagSet) {
	l.blockSize = afpacket.DefaultBlockSize
	fs.Var(&l.ifaces, "interface", "capture live on `iface`: a name, a comma-separated list, 'any' (every up interface but loopback) or /regex/; repeatable")
	fs.Var(&l.ifaces, "i", "short for --interface `iface`")
	fs.StringVar(&l.source, "source", "afpacket", "live `source`: afpacket (packet rings, decoded in user space), ebpf (TCX programs aggregate flows in the kernel), conntrack (the kernel's connection tracking table, with NAT; no -i) or nflog (packets firewall rules log and drop, as deny flows; no -i)")
	fs.IntVar(&l.workers, "workers", 1, "live capture goroutines, each with its own ring per interface (PACKET_FANOUT by flow hash) and its own flow table shard")
	fs.StringVar(&l.filter, "filter", "", "tcpdump-syntax `expression` run in the kernel before the ring (for example 'tcp port 443 or udp')")
	fs.Var(&l.blockSize, "ring-block-size", "ring block `size` per socket (power of two: 256KiB, 1MiB, 4MiB)")
	fs.IntVar(&l.blocks, "ring-blocks", afpacket.DefaultNumBlocks, "ring blocks per socket (ring memory per interface = workers × blocks × block size)")
	l.priv.flags(fs)
	l.http.flags(fs, "127.0.0.1:9464", "Prometheus metrics (/metrics) and, with -i, the live flows (/flows/live, what 'weir query --live' reads)")
	fs.DurationVar(&l.interval, "interval", 5*time.Second, "with --output=table: print the top live flows this often (0: only at exit)")
	fs.DurationVar(&l.duration, "duration", 0, "stop live capture after this long, as on SIGTERM (0: run until interrupted)")
	fs.StringVar(&l.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the capture to `file` (for go tool pprof)")
	fs.IntVar(&l.queueDepth, "queue-depth", agent.DefaultQueueDepth, "batches of 1024 records queued per sink; a slow sink drops (and counts) beyond this")
	fs.Var(&l.netns, "netns", "--source ebpf, conntrack or nflog: also watch (ebpf) or read (conntrack, nflog: one) the network namespace `name` (/run/netns/name, or a path); repeatable for ebpf. Its interfaces are named name/iface in records")
	l.ebpf.flags(fs)
	l.ct.flags(fs)
}

// listFlag collects repeated flag values (a list in a --config file).
type listFlag = cli.List

// sizeFlag is a byte count written as 4096, 256KiB, 1MiB or 1GiB.
type sizeFlag = cli.Size

// afpacket is the AF_PACKET capture's configuration: checked now, opened
// by the agent.
func (o *captureOpts) afpacket(sel *netdev.Selector, stdout_, stderr io.Writer, files []fileNeed) (func() (agent.Producer, error), error) {
	l := &o.live
	if l.workers < 1 || l.workers > afpacket.MaxWorkers {
		return nil, agent.Usagef("--workers must be 1..%d, got %d", afpacket.MaxWorkers, l.workers)
	}
	cfg := afpacket.Config{Select: sel, Workers: l.workers, Table: o.table(), Decoder: packet.Config{Decap: o.decap},
		Ring: afpacket.RingConfig{BlockSize: int(l.blockSize), NumBlocks: l.blocks}, Logf: logf(stderr, "capture"),
		Ready: func(names []string) {
			for i := range names {
				names[i] = termsafe.String(names[i])
			}
			fmt.Fprintf(stderr, "weir capture: listening on %d interfaces (%s) matching %s, %d workers\n",
				len(names), strings.Join(names, ", "), sel, l.workers)
			// The first rings are open: from now on only interfaces that
			// appear later need a new socket.
			l.priv.dropCaps(stderr, "capture", caps.Of(caps.NetRaw), "to open the rings of interfaces that appear later", files...)
		}}
	if o.sinks.output == "table" && l.interval > 0 {
		cfg.Views, cfg.ViewTop, cfg.ViewInterval = stdout_, o.sinks.top, l.interval
		cfg.ViewRedraw = isTerminal(stdout_) // like top on a terminal; appended when piped
	}
	if l.filter != "" {
		f, err := afpacket.CompileFilter(l.filter)
		if err != nil {
			return nil, agent.Usagef("--filter: %v", err)
		}
		cfg.Filter = f
	}
	if _, err := (afpacket.RingConfig{Iface: "x", BlockSize: int(l.blockSize), NumBlocks: l.blocks}).Validate(); err != nil {
		return nil, agent.Usagef("%v", err)
	}
	return func() (agent.Producer, error) {
		c, err := afpacket.New(cfg)
		if err != nil {
			return nil, agent.Usagef("%v", err)
		}
		return c, nil
	}, nil
}

// logf returns a printf to stderr as weir cmd.
var logf = cli.Logf
