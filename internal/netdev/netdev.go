// Package netdev lists the network interfaces of a network namespace,
// watches them appear, change and disappear over rtnetlink, and decides
// which of them a capture should use (Selector).
//
// Everything works in the network namespace of the calling OS thread at
// the moment List or Watch is called: netlink sockets belong for their
// whole life to the namespace they were created in, so a Watcher made on a
// thread locked into a namespace keeps reporting that namespace's links
// whichever goroutine later calls Next.
//
// rtnetlink messages are outside bytes: they are decoded defensively
// (bounded attribute walks, lengths checked before use), and a malformed
// message is skipped and counted with a reason (Stats), never a panic.
package netdev

import (
	"errors"
	"sync/atomic"
)

// Link is one network interface as rtnetlink describes it.
type Link struct {
	Index int    // ifindex, > 0
	Name  string // interface name, 1 to 15 bytes
	// Up is IFF_UP: the link is administratively up ("ip link set up").
	Up bool
	// Running is IFF_RUNNING as the kernel reports it in ifi_flags: set when
	// the link is up and its operational state is UP or UNKNOWN (loopback,
	// dummy and tun links without carrier reporting are UNKNOWN, so they
	// run as soon as they are up; a veth runs once its peer is up too).
	Running  bool
	Loopback bool   // IFF_LOOPBACK
	Type     uint16 // ARPHRD_* link type (1 Ethernet, 772 loopback, 65534 none/tun, ...)
	Master   int    // IFLA_MASTER: ifindex of the bridge (or bond, VRF) the link is enslaved to, 0 if none
	Kind     string // IFLA_LINKINFO/IFLA_INFO_KIND ("veth", "bridge", "dummy", ...), "" when absent (lo, physical NICs)
}

// Event is one change of one link.
type Event struct {
	Link    Link // the link's state after the change (before it, for a deletion)
	Deleted bool // RTM_DELLINK: the link is gone (or left the namespace)
}

var (
	// ErrClosed is returned by Watcher methods after Close.
	ErrClosed = errors.New("netdev: watcher closed")
	// ErrOverrun is returned by Watcher.Next when the kernel dropped
	// notifications because the socket's receive buffer was full (ENOBUFS).
	// Some changes were lost: the caller re-lists (Watcher.List) and
	// reconciles. The Watcher keeps working.
	ErrOverrun = errors.New("netdev: rtnetlink notifications lost (receive buffer overrun); re-list")
	// ErrUnsupported is returned by List and Watch on systems without rtnetlink.
	ErrUnsupported = errors.New("netdev: rtnetlink is not supported on this system")
)

// Reason says why a netlink message (or datagram) was skipped as malformed.
type Reason uint8

// Reasons a message is skipped. Reason 0 means "not malformed".
const (
	ReasonNone        Reason = iota
	ReasonShortHeader        // fewer bytes left than a netlink header (16)
	ReasonBadLength          // nlmsg_len below the header size or past the end of the datagram
	ReasonShortBody          // link message shorter than struct ifinfomsg (16)
	ReasonBadIndex           // ifindex zero or negative
	ReasonBadAttr            // attribute length below 4 or past the end of its message, or a payload of the wrong size
	ReasonNoName             // no IFLA_IFNAME attribute
	ReasonBadName            // empty name, or longer than 15 bytes
	ReasonTruncated          // datagram larger than the receive buffer (MSG_TRUNC)
	ReasonForeign            // datagram not sent by the kernel (netlink port id != 0)
	NumReasons               // number of reasons, for arrays indexed by Reason
)

var reasonNames = [NumReasons]string{
	ReasonNone:        "none",
	ReasonShortHeader: "short-header",
	ReasonBadLength:   "bad-length",
	ReasonShortBody:   "short-body",
	ReasonBadIndex:    "bad-index",
	ReasonBadAttr:     "bad-attr",
	ReasonNoName:      "no-name",
	ReasonBadName:     "bad-name",
	ReasonTruncated:   "truncated",
	ReasonForeign:     "foreign",
}

// String names the reason, as used in metric labels.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Stats counts what a Watcher (or List, see ListStats) has read.
type Stats struct {
	Messages  uint64             // netlink messages read (notifications and dump replies), malformed ones included
	Events    uint64             // events Next returned
	Ignored   uint64             // well-formed messages that are not link events (AF_BRIDGE port messages, NOOP, errors, other types)
	Malformed uint64             // messages or datagrams skipped as malformed: the sum of ByReason
	ByReason  [NumReasons]uint64 // Malformed by reason
	Overruns  uint64             // times notifications were lost (ENOBUFS, or a truncated datagram) and Next returned ErrOverrun
}

// counters is the concurrently updated form of Stats.
type counters struct {
	messages, events, ignored, overruns atomic.Uint64
	byReason                            [NumReasons]atomic.Uint64
}

func (c *counters) malformed(r Reason) { c.byReason[r].Add(1) }

func (c *counters) snapshot() Stats {
	s := Stats{
		Messages: c.messages.Load(),
		Events:   c.events.Load(),
		Ignored:  c.ignored.Load(),
		Overruns: c.overruns.Load(),
	}
	for i := range c.byReason {
		s.ByReason[i] = c.byReason[i].Load()
		s.Malformed += s.ByReason[i]
	}
	return s
}

// listCounters counts the messages read by the package-level List.
var listCounters counters

// ListStats returns what every call of the package-level List has read in
// this process, malformed messages it skipped included (Events and
// Overruns stay 0).
func ListStats() Stats { return listCounters.snapshot() }
