package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/agent"
	"github.com/weir-dev/weir/internal/netdev"
	"github.com/weir-dev/weir/internal/source/ebpf"
)

// ebpfOpts are the flags of the eBPF source (weir capture --source ebpf).
type ebpfOpts struct {
	maxFlows    int
	evict       time.Duration
	ringSize    sizeFlag
	noRing      bool
	sampling    int
	sampleFlows bool
	drops       bool
	attach      string
}

func (e *ebpfOpts) flags(fs *flag.FlagSet) {
	e.ringSize = ebpf.DefaultRingSize
	fs.IntVar(&e.maxFlows, "ebpf-max-flows", ebpf.DefaultMaxFlows, "--source ebpf: entries of each of the two kernel flow maps (flows between two drains; more overflow to the ring); also the flow table's size unless --max-flows is given")
	fs.DurationVar(&e.evict, "ebpf-evict-interval", ebpf.DefaultEvictInterval, "--source ebpf: drain the kernel flow map this often (it must be shorter than --idle-timeout)")
	fs.Var(&e.ringSize, "ebpf-ring-size", "--source ebpf: overflow ring `size` (power of two: 256KiB, 1MiB, 4MiB) for packets the map has no room for")
	fs.BoolVar(&e.noRing, "ebpf-no-ring", false, "--source ebpf: no overflow ring; packets the full map cannot take are only counted (weir_ebpf_lost_packets_total)")
	fs.IntVar(&e.sampling, "sampling", 1, "--source ebpf: count 1 packet in `N`, chosen by a hash of its content (alike at every interface)")
	fs.BoolVar(&e.sampleFlows, "sample-flows", false, "--source ebpf: with --sampling, choose whole flows (both directions) by hash instead of packets")
	fs.StringVar(&e.attach, "ebpf-attach", "auto", "--source ebpf: attach the programs with `mode` tcx (TCX links), tc (clsact qdisc filters) or auto (TCX where the kernel has it, else tc)")
	fs.BoolVar(&e.drops, "ebpf-drops", false, "--source ebpf: also attribute packets the kernel drops (skb:kfree_skb) to their flows, with the drop reason (drop_packets, drop_bytes, drop_reason in records)")
}

// ebpf is the eBPF source's configuration: checked now, loaded by the
// agent; ready drops the capabilities it no longer needs.
func (o *captureOpts) ebpf(fs *flag.FlagSet, sel *netdev.Selector, stderr io.Writer) (func() (agent.Producer, error), func(), error) {
	e := &o.live.ebpf
	if e.maxFlows < 1 || e.evict <= 0 || e.sampling < 1 {
		return nil, nil, agent.Usagef("--ebpf-max-flows and --sampling must be at least 1, --ebpf-evict-interval positive")
	}
	cfg := ebpf.Config{Select: sel, MaxFlows: e.maxFlows, EvictInterval: e.evict, Table: o.table(),
		Sampling: e.sampling, SampleFlows: e.sampleFlows, RingSize: int(e.ringSize), Drops: e.drops,
		Attach: ebpf.AttachMode(strings.TrimPrefix(e.attach, "auto")), Logf: logf(stderr, "capture")}
	if e.noRing {
		cfg.RingSize = -1
	}
	if len(o.live.netns) > 0 {
		cfg.Netns = []ebpf.Netns{{Do: func(fn func() error) error { return fn() }}}
		for _, n := range o.live.netns {
			path := netdev.NetnsPath(n)
			cfg.Netns = append(cfg.Netns, ebpf.Netns{Name: n, Do: func(fn func() error) error { return netdev.InNetns(path, fn) }})
		}
	}
	if !isSet(fs, "max-flows") { // the table holds what the kernel map holds; --max-flows overrides
		cfg.Table.MaxFlows = e.maxFlows
	}
	open := func() (agent.Producer, error) {
		s, err := ebpf.New(cfg)
		if errors.Is(err, ebpf.ErrConfig) {
			return nil, agent.Usagef("%v", err)
		}
		return agent.Of(s, err)
	}
	return open, func() {
		o.live.priv.dropCaps(stderr, "capture", cfg.Keep(), "to attach to interfaces that appear later", o.files...)
	}, nil
}
