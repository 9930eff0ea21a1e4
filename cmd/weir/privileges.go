package main

import (
	"flag"
	"io"

	"github.com/weir-dev/weir/internal/caps"
)

// dropPrivileges is false in tests that run weir in their own process
// (their privileges must outlive the command); weir itself, and the test
// binary when it runs as weir, drop them.
var dropPrivileges = true

// privOpts is --drop-privileges.
type privOpts struct{ drop bool }

func (p *privOpts) flags(fs *flag.FlagSet) {
	fs.BoolVar(&p.drop, "drop-privileges", true, "once the sources are open, give up the capabilities they no longer need (see README: what each source keeps); false keeps them all")
}

// dropCaps gives up every capability but keep (and those the files in
// need ask for), and says on stderr what it kept (caps.DropAndSay, which
// lists what each source keeps and why).
func (p *privOpts) dropCaps(stderr io.Writer, cmd string, keep caps.Set, why string, files ...fileNeed) {
	if p.drop && dropPrivileges {
		caps.DropAndSay(stderr, cmd, keep, why, files...)
	}
}

// fileNeed is a path weir still uses while it runs.
type fileNeed = caps.Need
