package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/agent"
	"github.com/weir-dev/weir/internal/meter"
	"github.com/weir-dev/weir/internal/netdev"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source/synthetic"
)

type captureOpts struct {
	read                 listFlag // --read files, in order; "-" is standard input
	synth                string
	decap                packet.Decap // --decap
	maxFlows             int
	idle, active, linger time.Duration
	stats                bool
	live                 liveOpts
	sinks                sinkOpts
	files                []fileNeed // what the running capture still touches (privileges.go)
}

func runCapture(args []string, stdout_, stderr io.Writer) int {
	var o captureOpts
	fs := helpFlagSet("capture")
	o.flags(fs)
	o.sinks.enrich.file.Log = stderr
	pos, done, code := parseInterleaved(fs, args, stdout_, stderr)
	if done {
		return code
	}
	cfg, err := o.config(fs, pos, stdout_, stderr)
	if err != nil {
		return exitStatus(stderr, "capture", err)
	}
	cfg.CPUProfile = o.live.cpuProfile
	return exitStatus(stderr, "capture", agent.Run(context.Background(), cfg))
}

func (o *captureOpts) flags(fs *flag.FlagSet) {
	o.live.flags(fs)
	o.sinks.flags(fs, true)
	fs.Var(&o.read, "read", "read packets from a pcap or pcapng `file` ('-': standard input; gzip or zstd compressed or not; repeatable, and files listed after it are read too, in order, as one capture); its own timestamps drive the timeouts")
	fs.Var(&o.read, "r", "short for --read")
	fs.Func("decap", "key the packets of these `tunnels` by the packet inside: vxlan (UDP 4789, 8472), geneve (UDP 6081), gre, ipip (IP in IP, protocols 4 and 41), or all; comma-separated", func(v string) error {
		d, err := packet.ParseDecap(v)
		o.decap |= d
		return err
	})
	fs.StringVar(&o.synth, "synthetic", "", "generate deterministic traffic: `spec` of key=value pairs: flows, packets, ipv6, udp, seed, min-payload, max-payload")
	fs.IntVar(&o.maxFlows, "max-flows", 262144, "flow table size: live flows kept at once (memory is preallocated, about 133 bytes per flow, 200 up to 16384 flows)")
	fs.DurationVar(&o.idle, "idle-timeout", 15*time.Second, "emit a flow after this long without packets")
	fs.DurationVar(&o.active, "active-timeout", 60*time.Second, "emit a long-lived flow's counters this often and keep it (0 disables)")
	fs.DurationVar(&o.linger, "end-linger", 2*time.Second, "after TCP FIN both ways or RST, wait this long for the last packets")
	fs.BoolVar(&o.stats, "stats", false, "print counters (frames, decode errors by reason, flows, evictions by reason, memory) to stderr at exit")
}

// exitStatus says what went wrong, one line at a time, and returns the exit
// status.
func exitStatus(stderr io.Writer, cmd string, err error) int {
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "weir %s: %s\n", cmd, line)
		}
	}
	return agent.ExitCode(err)
}

// exitErr says err in one message (a server's answer may span lines) and
// returns the exit status.
func exitErr(stderr io.Writer, cmd string, err error) int {
	if err != nil {
		fmt.Fprintf(stderr, "weir %s: %v\n", cmd, err)
	}
	return agent.ExitCode(err)
}

// table is the flow table's configuration.
func (o *captureOpts) table() meter.TableConfig {
	return meter.TableConfig{MaxFlows: o.maxFlows, IdleTimeout: o.idle, ActiveTimeout: o.active, EndLinger: o.linger}
}

// config checks the flags and turns them into the agent's configuration.
func (o *captureOpts) config(fs *flag.FlagSet, pos []string, stdout_, stderr io.Writer) (agent.Config, error) {
	var cfg agent.Config
	if len(pos) > 0 && len(o.read) == 0 {
		return cfg, agent.Usagef("unexpected argument %q: only --read takes several files (see 'weir capture --help')", pos[0])
	}
	o.read = append(o.read, pos...)
	m, err := o.mode()
	if err != nil {
		return cfg, err
	}
	if err := checkModes(fs, m); err != nil {
		return cfg, err
	}
	if o.maxFlows < 1 {
		return cfg, agent.Usagef("--max-flows must be at least 1, got %d", o.maxFlows)
	}
	if o.idle <= 0 || o.active < 0 || o.linger < 0 {
		return cfg, agent.Usagef("--idle-timeout must be positive, --active-timeout and --end-linger not negative")
	}
	o.sinks.store.Log = stderr
	sinks, err := o.sinks.sinks(stdout_, m&mLive != 0 || o.sinks.store.given())
	if err != nil {
		return cfg, err
	}
	if m&mReplay != 0 && !isSet(fs, "node-name") {
		sinks.Node = "" // a file was not observed here
	}
	o.files = sinks.Needs(o.sinks.enrich.file.Path)
	cfg = agent.Config{Sinks: sinks, Log: stderr, HTTP: agent.HTTP{Addr: "off"}}
	if o.stats {
		cfg.Stats = stderr
	}
	if m&mReplay != 0 {
		cfg.Open, err = o.replay(stderr)
		return cfg, err
	}
	l := &o.live
	if l.duration < 0 || l.interval < 0 || l.queueDepth < 1 {
		return cfg, agent.Usagef("--duration and --interval must not be negative, --queue-depth at least 1")
	}
	cfg.Live, cfg.QueueDepth, cfg.Duration, cfg.HTTP, cfg.API = true, l.queueDepth, l.duration, l.http.HTTP, l.http.api
	if m&(mConntrack|mNFLOG) != 0 {
		cfg.Open, cfg.Ready, err = o.conntrack(stderr)
		return cfg, err
	}
	sel, err := netdev.ParseSelector(l.ifaces)
	if err != nil {
		return cfg, agent.Usagef("-i: %v", err)
	}
	if m == mEBPF {
		cfg.Open, cfg.Ready, err = o.ebpf(fs, sel, stderr)
		return cfg, err
	}
	cfg.Open, err = o.afpacket(sel, stdout_, stderr, o.files)
	return cfg, err
}

// replay opens the capture files or the synthetic traffic, and the meter.
func (o *captureOpts) replay(stderr io.Writer) (func() (agent.Producer, error), error) {
	r := agent.Replay{Meter: meter.Config{Table: o.table(), Decoder: packet.Config{Decap: o.decap}}, Files: o.read, Logf: logf(stderr, "capture")}
	if o.synth != "" {
		scfg, err := synthetic.ParseSpec(o.synth)
		if err != nil {
			return nil, agent.Usagef("--synthetic: %v", err)
		}
		r.Synthetic = &scfg
	}
	return r.Open, nil
}
