package main

import (
	"flag"

	"github.com/weir-dev/weir/internal/agent"
	"github.com/weir-dev/weir/internal/cli"
)

// mode is what a capture reads.
type mode = uint

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
var flagModes = []cli.ModeRule{
	{Names: "workers filter ring- interval", Modes: mAFPacket, Need: "need live capture (-i) with --source afpacket"},
	{Names: "source duration queue-depth cpuprofile drop-privileges metrics- api-", Modes: mLive, Need: "need live capture (-i, or --source conntrack|nflog)"},
	{Names: "ebpf- sampling sample-flows", Modes: mEBPF, Need: "need --source ebpf"},
	{Names: "netns", Modes: mEBPF | mConntrack | mNFLOG, Need: "need --source ebpf, conntrack or nflog"},
	{Names: "ct-", Modes: mConntrack, Need: "need --source conntrack"},
	{Names: "nflog-", Modes: mConntrack | mNFLOG, Need: "need --source conntrack or nflog"},
	{Names: "interface i end-linger max-flows", Modes: mReplay | mAFPacket | mEBPF, Need: "do not apply to --source conntrack or nflog"},
	{Names: "decap", Modes: mReplay | mAFPacket, Need: "needs the packets: --read, or -i with --source afpacket"},
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
	if err := cli.CheckModes(fs, flagModes, m); err != nil {
		return agent.Usagef("%v", err)
	}
	return nil
}
