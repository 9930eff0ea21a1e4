package main

import (
	"flag"
	"io"
	"os"
	"time"

	"github.com/weir-dev/weir/internal/agent"
	"github.com/weir-dev/weir/internal/cli"
	"github.com/weir-dev/weir/internal/netdev"
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

// storeConfig builds the connection store's configuration from the flags.
func (c *ctOpts) storeConfig(o *captureOpts) (conntrack.StoreConfig, error) {
	cfg := conntrack.StoreConfig{MaxConns: c.maxConns, IdleTimeout: o.idle, ActiveTimeout: o.active, StaleTimeout: c.stale}
	if o.active == 0 {
		cfg.ActiveTimeout = 1<<63 - 1 // 0 disables, as for flows
	}
	if c.maxConns < 1 || c.poll <= 0 || c.stale <= 0 {
		return cfg, agent.Usagef("--ct-max-conns must be at least 1, --ct-poll-interval and --ct-stale-timeout positive")
	}
	if err := cfg.ParseFilter(c.zones, c.mark, c.labels); err != nil {
		return cfg, agent.Usagef("%v", err)
	}
	return cfg, nil
}

// conntrack is the configuration of the conntrack source (with any NFLOG
// groups), or of the NFLOG source alone: checked now, opened by the
// agent; ready drops the capabilities they no longer need.
func (o *captureOpts) conntrack(stderr io.Writer) (func() (agent.Producer, error), func(), error) {
	l, c := &o.live, &o.live.ct
	storeCfg, err := c.storeConfig(o)
	if err != nil {
		return nil, nil, err
	}
	groups, err := cli.Uint16s(c.groups, "--nflog-group", "group")
	if err != nil {
		return nil, nil, agent.Usagef("%v", err)
	}
	if l.source == "nflog" && len(groups) == 0 {
		return nil, nil, agent.Usagef("--source nflog needs --nflog-group N")
	}
	if len(l.netns) > 1 {
		return nil, nil, agent.Usagef("--source %s reads one network namespace: give --netns at most once", l.source)
	}
	var netns func(func() error) error
	var nsName string
	if len(l.netns) == 1 {
		nsName = l.netns[0]
		path := netdev.NetnsPath(nsName)
		if _, err := os.Stat(path); err != nil {
			return nil, nil, agent.Usagef("--netns: %v", err)
		}
		netns = func(fn func() error) error { return netdev.InNetns(path, fn) }
	}
	log := logf(stderr, "capture")
	ctCfg := conntrack.SourceConfig{Netns: netns, NetnsName: nsName, PollInterval: c.poll, NoEvents: c.noEvents, Store: storeCfg, Logf: log}
	active := o.active
	if active == 0 {
		active = -1 // --active-timeout 0: never
	}
	nlCfg := nflog.SourceConfig{Netns: netns, Where: nsName, Groups: groups, MaxFlows: c.denyMax, IdleTimeout: o.idle, ActiveTimeout: active, Logf: log}
	nf := agent.Netfilter{NFLOG: &nlCfg, Netns: nsName}
	if l.source == "conntrack" {
		nf.Conntrack = &ctCfg
	}
	return nf.Open, func() {
		keep, why := nf.Keep()
		l.priv.dropCaps(stderr, "capture", keep, why, o.files...)
	}, nil
}
