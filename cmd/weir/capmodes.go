package main

import (
	"flag"
	"strings"

	"github.com/weir-dev/weir/internal/agent"
)

// mode is what a capture reads.
type mode uint8

const (
	mRead mode = 1 << iota
	mSynthetic
	mAFPacket
	mEBPF
	mConntrack
	mNFLOG

	mReplay = mRead | mSynthetic
	mLive   = mAFPacket | mEBPF | mConntrack | mNFLOG
)

// flagModes says which modes the capture flags apply to, and what to say
// when one is given elsewhere; a flag not listed applies to every mode.
// A name ending in '-' is a prefix.
var flagModes = []struct {
	names string
	modes mode
	need  string
}{
	{"workers filter ring- interval", mAFPacket, "need live capture (-i) with --source afpacket"},
	{"source duration queue-depth cpuprofile drop-privileges metrics- api-", mLive, "need live capture (-i, or --source conntrack|nflog)"},
	{"ebpf- sampling sample-flows", mEBPF, "need --source ebpf"},
	{"netns", mEBPF | mConntrack | mNFLOG, "need --source ebpf, conntrack or nflog"},
	{"ct-", mConntrack, "need --source conntrack"},
	{"nflog-", mConntrack | mNFLOG, "need --source conntrack or nflog"},
	{"interface i end-linger max-flows", mReplay | mAFPacket | mEBPF, "do not apply to --source conntrack or nflog"},
	{"decap", mReplay | mAFPacket, "needs the packets: --read, or -i with --source afpacket"},
}

// mode says which input the flags ask for: exactly one.
func (o *captureOpts) mode() (mode, error) {
	ct := o.live.source == "conntrack" || o.live.source == "nflog"
	var m mode
	n := 0
	for _, in := range []struct {
		set bool
		m   mode
	}{{len(o.read) > 0, mRead}, {o.synth != "", mSynthetic}, {len(o.live.ifaces) > 0 || ct, mAFPacket}} {
		if in.set {
			m, n = in.m, n+1
		}
	}
	if n != 1 {
		return 0, agent.Usagef("give exactly one input: -i IFACE, --read FILE..., --synthetic SPEC or --source conntrack|nflog (see 'weir capture --help')")
	}
	if m != mAFPacket {
		return m, nil
	}
	switch o.live.source {
	case "afpacket":
		return mAFPacket, nil
	case "ebpf":
		return mEBPF, nil
	case "conntrack":
		return mConntrack, nil
	case "nflog":
		return mNFLOG, nil
	}
	return 0, agent.Usagef("--source must be afpacket, ebpf, conntrack or nflog, got %q", o.live.source)
}

// checkModes refuses the flags given that do not apply to m, by the
// table above: one message per row.
func checkModes(fs *flag.FlagSet, m mode) error {
	bad := make([][]string, len(flagModes))
	fs.Visit(func(f *flag.Flag) {
		for i, row := range flagModes {
			if row.modes&m == 0 && matches(row.names, f.Name) {
				dash := "--"
				if len(f.Name) == 1 {
					dash = "-"
				}
				bad[i] = append(bad[i], dash+f.Name)
			}
		}
	})
	for i, names := range bad {
		if len(names) > 0 {
			return agent.Usagef("%s %s", strings.Join(names, ", "), flagModes[i].need)
		}
	}
	return nil
}

// matches reports whether name is one of the space-separated names, or
// starts with one of them that ends in '-'.
func matches(names, name string) bool {
	for _, n := range strings.Fields(names) {
		if n == name || strings.HasSuffix(n, "-") && strings.HasPrefix(name, n) {
			return true
		}
	}
	return false
}
