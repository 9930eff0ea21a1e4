//go:build linux

package netdev

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

const (
	recvBufSize  = 64 << 10        // one datagram; the kernel caps dump datagrams at 32 KiB, notifications are one link each
	dumpTimeout  = 5 * time.Second // SO_RCVTIMEO on dump sockets: a List never hangs
	dumpRetries  = 5               // redo an interrupted (NLM_F_DUMP_INTR) dump at most this often
	maxDumpLinks = 1 << 20         // refuse dumps with more links than this: bounded memory
	maxDumpGrams = 1 << 20         // and more datagrams than this: bounded time
)

// dumpSeq numbers dump requests process-wide, so a late reply to an old
// request is never taken for a reply to a new one.
var dumpSeq atomic.Uint32

// List returns the links of the calling thread's network namespace, sorted
// by Index. Malformed messages in the kernel's reply are skipped and counted
// (ListStats).
func List() ([]Link, error) {
	d, err := newDumper()
	if err != nil {
		return nil, err
	}
	defer func() { _ = d.close() }() // a read-only netlink dump: nothing to lose
	return d.list(&listCounters, nil)
}

// dumper is a NETLINK_ROUTE socket for RTM_GETLINK dump requests.
type dumper struct {
	fd   int
	port uint32 // the socket's netlink port id: replies are addressed to it
	buf  []byte
}

// newDumper opens a dump socket in the calling thread's namespace.
func newDumper() (*dumper, error) {
	fd, err := openRoute()
	if err != nil {
		return nil, err
	}
	d := &dumper{fd: fd}
	if d.port, err = portID(fd); err != nil {
		unix.Close(fd)
		return nil, err
	}
	tv := unix.NsecToTimeval(int64(dumpTimeout))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netdev: SO_RCVTIMEO: %w", err)
	}
	return d, nil
}

func (d *dumper) close() error { return unix.Close(d.fd) }

// openRoute opens and binds a NETLINK_ROUTE socket (port id chosen by the
// kernel, no multicast groups yet).
func openRoute() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return -1, fmt.Errorf("netdev: netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("netdev: netlink bind: %w", err)
	}
	return fd, nil
}

// portID returns the netlink port id the kernel gave fd.
func portID(fd int) (uint32, error) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return 0, fmt.Errorf("netdev: netlink getsockname: %w", err)
	}
	nl, ok := sa.(*unix.SockaddrNetlink)
	if !ok {
		return 0, fmt.Errorf("netdev: netlink getsockname: unexpected address %T", sa)
	}
	return nl.Pid, nil
}

// list dumps the links, redoing the dump if the kernel says it was
// interrupted by a concurrent change. raw, if set, sees every datagram
// (tests use it to collect real messages).
func (d *dumper) list(c *counters, raw func([]byte)) ([]Link, error) {
	for range dumpRetries {
		links, intr, err := d.dumpOnce(c, raw)
		if err != nil {
			return nil, err
		}
		if !intr {
			return links, nil
		}
	}
	return nil, fmt.Errorf("netdev: link dump interrupted %d times in a row by concurrent changes", dumpRetries)
}

// dumpOnce sends one RTM_GETLINK dump request and reads the reply up to
// NLMSG_DONE. intr reports NLM_F_DUMP_INTR on any reply message.
func (d *dumper) dumpOnce(c *counters, raw func([]byte)) (links []Link, intr bool, err error) {
	seq := dumpSeq.Add(1)
	if err := d.send(seq); err != nil {
		return nil, false, err
	}
	if d.buf == nil {
		d.buf = make([]byte, recvBufSize)
	}
	for range maxDumpGrams {
		n, from, err := unix.Recvfrom(d.fd, d.buf, unix.MSG_TRUNC)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN || err == unix.EWOULDBLOCK {
			return nil, false, fmt.Errorf("netdev: no reply to the link dump within %v", dumpTimeout)
		}
		if err != nil {
			return nil, false, fmt.Errorf("netdev: link dump: %w", err)
		}
		if nl, ok := from.(*unix.SockaddrNetlink); !ok || nl.Pid != 0 {
			c.malformed(ReasonForeign)
			continue
		}
		if n > len(d.buf) {
			// The messages in it are lost, so the dump is incomplete: redo it.
			c.malformed(ReasonTruncated)
			intr = true
			continue
		}
		b := d.buf[:n]
		if raw != nil {
			raw(b)
		}
		for len(b) > 0 {
			h, body, rest, r := splitMessage(b)
			c.messages.Add(1)
			if r != ReasonNone {
				c.malformed(r)
				break
			}
			b = rest
			if h.Seq != seq || h.Pid != d.port {
				c.ignored.Add(1) // left over from an earlier, abandoned request
				continue
			}
			if h.Flags&nlmFDumpIntr != 0 {
				intr = true
			}
			switch h.Type {
			case nlmsgDone:
				if len(body) >= 4 {
					if e := int32(ne.Uint32(body)); e < 0 {
						return nil, false, fmt.Errorf("netdev: link dump: %w", unix.Errno(-e))
					}
				}
				return sortLinks(links), intr, nil
			case nlmsgError:
				if len(body) < 4 {
					c.malformed(ReasonShortBody)
					return nil, false, fmt.Errorf("netdev: link dump: short NLMSG_ERROR")
				}
				if e := int32(ne.Uint32(body)); e < 0 {
					return nil, false, fmt.Errorf("netdev: link dump: %w", unix.Errno(-e))
				}
				c.ignored.Add(1) // an ack: not requested, harmless
			case rtmNewLink:
				l, fam, r := parseLink(body)
				switch {
				case r != ReasonNone:
					c.malformed(r)
				case fam != afUnspec:
					c.ignored.Add(1)
				default:
					if len(links) >= maxDumpLinks {
						return nil, false, fmt.Errorf("netdev: link dump: more than %d links", maxDumpLinks)
					}
					links = append(links, l)
				}
			default:
				c.ignored.Add(1)
			}
		}
	}
	return nil, false, fmt.Errorf("netdev: link dump: no NLMSG_DONE after %d datagrams", maxDumpGrams)
}

// send writes the dump request: nlmsghdr, ifinfomsg (AF_UNSPEC, all zero)
// and IFLA_EXT_MASK asking the kernel to leave the statistics out.
func (d *dumper) send(seq uint32) error {
	const n = nlmsgHdrLen + ifinfomsgLen + rtattrHdrLen + 4
	var b [n]byte
	ne.PutUint32(b[0:], n)
	ne.PutUint16(b[4:], rtmGetLink)
	ne.PutUint16(b[6:], nlmFRequest|nlmFDump)
	ne.PutUint32(b[8:], seq)
	ne.PutUint32(b[12:], d.port)
	a := b[nlmsgHdrLen+ifinfomsgLen:]
	ne.PutUint16(a[0:], rtattrHdrLen+4)
	ne.PutUint16(a[2:], iflaExtMask)
	ne.PutUint32(a[4:], rtextFilterSkipStats)
	for {
		err := unix.Sendto(d.fd, b[:], 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("netdev: sending link dump request: %w", err)
		}
		return nil
	}
}

// sortLinks sorts by Index and keeps the last copy of a repeated index.
func sortLinks(links []Link) []Link {
	slices.SortStableFunc(links, func(a, b Link) int { return a.Index - b.Index })
	out := links[:0]
	for i, l := range links {
		if i+1 < len(links) && links[i+1].Index == l.Index {
			continue
		}
		out = append(out, l)
	}
	return out
}
