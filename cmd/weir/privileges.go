package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

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

// What each source keeps once it runs, and why. Each claim is checked by
// experiment (internal/caps tests, and the end-to-end tests, which run a
// weir built without cgo, so that it drops for real):
//   - AF_PACKET: CAP_NET_RAW, to open the rings of interfaces that appear,
//     come up or are renamed later (the ring, fanout and filter need
//     nothing more);
//   - conntrack: CAP_NET_ADMIN: the kernel checks the sender of every dump
//     request, not only the socket's opener; NFLOG: nothing (the groups
//     are bound at start and messages only read);
//   - eBPF: nothing on kernels with TCX (6.6+), where attaching the loaded
//     programs to a new interface and draining the maps need no
//     capability; before that, CAP_BPF (every bpf() command needed it while
//     kernel.unprivileged_bpf_disabled is set), CAP_NET_ADMIN (clsact
//     filters) and, with --ebpf-drops, CAP_PERFMON. --ebpf-attach tc
//     keeps CAP_NET_ADMIN everywhere;
//   - --netns (conntrack, NFLOG, eBPF): CAP_SYS_ADMIN, to enter the
//     namespace again (reopening a failed dump socket, naming an NFLOG
//     packet's interface, attaching to a new interface);
//   - weir collect: nothing (its sockets are bound at start);
//   - any: CAP_DAC_OVERRIDE when the data directory, or the --enrich file,
//     is not reachable by weir's own user and groups through the file
//     modes (weir keeps writing the one and reading the other).

// dropCaps gives up every capability but keep (and those the files in
// need ask for), and says on stderr what it kept. Failing to drop is a
// warning, not an error: the source runs as it would have before.
func (p *privOpts) dropCaps(stderr io.Writer, cmd string, keep caps.Set, why string, files ...fileNeed) {
	if !p.drop || !dropPrivileges {
		return
	}
	var dac []string
	for _, f := range files {
		if f.path != "" && !reachable(f.path, f.dir) {
			dac = append(dac, f.path)
		}
	}
	if len(dac) > 0 {
		keep |= caps.Of(caps.DACOverride)
		why = strings.TrimPrefix(why+"; cap_dac_override for "+strings.Join(dac, ", ")+" (not reachable through its modes by weir's user)", "; ")
	}
	res, err := caps.Drop(keep)
	switch {
	case errors.Is(err, caps.ErrCgo):
		fmt.Fprintf(stderr, "weir %s: warning: capabilities not dropped: this weir is built with cgo; build it with CGO_ENABLED=0 (as 'make build' does)\n", cmd)
	case err != nil:
		fmt.Fprintf(stderr, "weir %s: warning: %v\n", cmd, err)
	case res.Dropped == 0:
		// Nothing was held (an unprivileged user): nothing to say.
	case res.Kept == 0:
		fmt.Fprintf(stderr, "weir %s: dropped every capability\n", cmd)
	default:
		fmt.Fprintf(stderr, "weir %s: dropped every capability but %s (%s)\n", cmd, res.Kept, why)
	}
}

// fileNeed is a path weir still uses while it runs: a directory it writes
// (the store) or a file it reads (the inventory).
type fileNeed struct {
	path string
	dir  bool
}

// reachable reports whether weir's effective user and groups reach path
// through its modes (and its ancestors'), without capabilities: search on
// every ancestor, read on a file, and read, write and search on a
// directory and everything under it (the store's own partitions, made by
// an earlier run of another user). ACLs are not read: when the modes say
// no, weir keeps CAP_DAC_OVERRIDE rather than guess.
func reachable(path string, dir bool) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		if !allowed(p, 1) {
			return false
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	if !dir {
		return allowed(abs, 4)
	}
	if _, err := os.Lstat(abs); errors.Is(err, fs.ErrNotExist) {
		return true // the store makes it, as weir's user
	}
	const limit = 100000 // entries looked at; a larger store keeps the capability
	n, ok := 0, true
	_ = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		n++
		switch {
		case err != nil || n > limit:
			ok = false
		case d.Type()&fs.ModeSymlink != 0:
			return nil // the store never follows them
		case d.IsDir():
			ok = allowed(p, 7)
		default:
			ok = allowed(p, 6)
		}
		if !ok {
			return filepath.SkipAll
		}
		return nil
	})
	return ok
}

// allowed reports whether the mode bits of path grant want (4 read, 2
// write, 1 search/execute, or'ed) to the effective user and groups.
func allowed(path string, want uint32) bool {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return false
	}
	mode := uint32(st.Mode) & 0o777 // uint16 on macOS and FreeBSD
	switch {
	case st.Uid == uint32(os.Geteuid()):
		return (mode>>6)&want == want
	case inGroup(st.Gid):
		return (mode>>3)&want == want
	}
	return mode&want == want
}

// inGroup reports whether gid is weir's effective group or a supplementary one.
func inGroup(gid uint32) bool {
	if gid == uint32(os.Getegid()) {
		return true
	}
	groups, _ := os.Getgroups()
	for _, g := range groups {
		if uint32(g) == gid {
			return true
		}
	}
	return false
}

// needs are the files a running capture or collector still touches: the
// store's directory and the --enrich file it reloads.
func (o *sinkOpts) needs() []fileNeed {
	var f []fileNeed
	if o.st != nil {
		f = append(f, fileNeed{path: o.store.dir, dir: true})
	}
	if o.enrich.path != "" && o.enrich.reload > 0 {
		f = append(f, fileNeed{path: o.enrich.path})
	}
	return f
}
