package caps

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// What each of weir's sources keeps once it runs, and why (the keep
// sets the commands pass to DropAndSay). Each claim is checked by
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

// Need is a path weir still uses while it runs: a directory it writes
// (the store) or a file it reads (the inventory).
type Need struct {
	Path string
	Dir  bool
}

// DropAndSay gives up every capability but keep (and CAP_DAC_OVERRIDE
// when a path in needs is not reachable through its modes by weir's own
// user), and says on w, as "weir CMD: ...", what it kept and why.
// Failing to drop is a warning, not an error: the source runs as it would
// have before.
func DropAndSay(w io.Writer, cmd string, keep Set, why string, needs ...Need) {
	var dac []string
	for _, f := range needs {
		if f.Path != "" && !Reachable(f.Path, f.Dir) {
			dac = append(dac, f.Path)
		}
	}
	if len(dac) > 0 {
		keep |= Of(DACOverride)
		why = strings.TrimPrefix(why+"; cap_dac_override for "+strings.Join(dac, ", ")+" (not reachable through its modes by weir's user)", "; ")
	}
	res, err := Drop(keep)
	switch {
	case errors.Is(err, ErrCgo):
		fmt.Fprintf(w, "weir %s: warning: capabilities not dropped: this weir is built with cgo; build it with CGO_ENABLED=0 (as 'make build' does)\n", cmd)
	case err != nil:
		fmt.Fprintf(w, "weir %s: warning: %v\n", cmd, err)
	case res.Dropped == 0:
		// Nothing was held (an unprivileged user): nothing to say.
	case res.Kept == 0:
		fmt.Fprintf(w, "weir %s: dropped every capability\n", cmd)
	default:
		fmt.Fprintf(w, "weir %s: dropped every capability but %s (%s)\n", cmd, res.Kept, why)
	}
}
