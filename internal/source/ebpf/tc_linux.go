//go:build linux

package ebpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// The clsact fallback, for kernels without TCX (before 6.6): the programs
// run as direct-action cls_bpf filters on a clsact qdisc, managed through
// rtnetlink. Constants missing from x/sys/unix are defined here, from
// linux/pkt_sched.h and linux/pkt_cls.h.
const (
	tcHClsact     = 0xFFFFFFF1 // TC_H_CLSACT, the clsact qdisc's parent (same as TC_H_INGRESS)
	tcHClsactMaj  = 0xFFFF0000 // the clsact qdisc's handle, ffff:
	tcHMinIngress = 0xFFF2     // TC_H_MIN_INGRESS
	tcHMinEgress  = 0xFFF3     // TC_H_MIN_EGRESS

	tcaBPFFD            = 6 // TCA_BPF_FD
	tcaBPFName          = 7 // TCA_BPF_NAME
	tcaBPFFlags         = 8 // TCA_BPF_FLAGS
	tcaBPFFlagActDirect = 1 // TCA_BPF_FLAG_ACT_DIRECT: the program's return value is the action

	// tcPrio is the filters' priority (tc "pref"): they run before filters at
	// higher numbers; among filters at one priority the newest runs first. A
	// direct-action filter returning TC_ACT_OK (0) ends the hook: the rest
	// only run after TC_ACT_UNSPEC (-1).
	tcPrio = 1
)

// Netlink message layout: struct nlmsghdr, struct tcmsg (family u8, pad
// u8, pad u16, ifindex s32, handle u32, parent u32, info u32), struct
// nlattr, and the bounds of a request.
const (
	nlHdrLen   = unix.NLMSG_HDRLEN // len u32, type u16, flags u16, seq u32, pid u32
	offIfindex = 4                 // offsets in struct tcmsg
	offHandle  = 8
	offParent  = 12
	offInfo    = 16
	tcMsgLen   = 20
	nlaHdrLen  = unix.NLA_HDRLEN // len u16, type u16

	nlBufSize  = 64 << 10 // receive buffer: the kernel fills dump datagrams up to 32 KiB
	nlMaxReads = 4096     // most datagrams read for one request
	nlTimeout  = 5 * time.Second

	threadNetns = "/proc/thread-self/ns/net" // the calling thread's network namespace
)

var (
	nlEndian = binary.NativeEndian
	// tcInfo is tcm_info of the filters: priority, and protocol in network byte order.
	tcInfo = tcPrio<<16 | uint32(nlEndian.Uint16(binary.BigEndian.AppendUint16(nil, unix.ETH_P_ALL)))
)

// tcFilter is a BPF filter (direct-action) on an interface's clsact qdisc.
type tcFilter struct {
	mu      sync.Mutex
	ifindex int
	parent  uint32 // the hook: TC_H_CLSACT major, TC_H_MIN_INGRESS or _EGRESS minor
	handle  uint32 // the filter's handle, chosen by the kernel (never 0)
	netns   int    // fd of the attaching thread's network namespace; -1 once closed
	qdisc   bool   // attachTC created the clsact qdisc
}

// attachTC puts prog on the ingress (egress=false) or egress hook of
// interface ifindex in the calling thread's network namespace: a cls_bpf
// filter named name, direct-action, protocol ETH_P_ALL, priority tcPrio,
// with a handle the kernel picks, on the interface's clsact qdisc. The
// qdisc is created if missing, and then deleted by Close once it has no
// filters left; filters sharing a created qdisc should be closed in the
// reverse order of their attachment.
func attachTC(ifindex int, prog *ebpf.Program, egress bool, name string) (_ *tcFilter, err error) {
	f := &tcFilter{ifindex: ifindex, parent: tcHook(egress), netns: -1}
	defer func() {
		if err != nil {
			f.closeNetns()
		}
	}()
	runtime.LockOSThread() // the namespace file and the socket from the same thread
	f.netns, err = unix.Open(threadNetns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	var c *nlConn
	if err == nil {
		c, err = dialNetlink()
	}
	runtime.UnlockOSThread()
	if err != nil {
		return nil, fmt.Errorf("tc attach %s: %w", name, err)
	}
	defer c.close()
	q := newTcMsg(ifindex, tcHClsactMaj, tcHClsact, 0).str(unix.TCA_KIND, "clsact")
	err = c.do(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_EXCL, q.b, nil)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("tc attach %s: creating clsact qdisc on ifindex %d: %w", name, ifindex, err)
	}
	f.qdisc = err == nil // else EEXIST: someone else's
	m := newTcMsg(ifindex, 0, f.parent, tcInfo).str(unix.TCA_KIND, "bpf")
	m.nest(unix.TCA_OPTIONS, func() {
		m.u32(tcaBPFFD, uint32(prog.FD())).str(tcaBPFName, name).u32(tcaBPFFlags, tcaBPFFlagActDirect)
	})
	err = c.do(unix.RTM_NEWTFILTER, unix.NLM_F_CREATE|unix.NLM_F_EXCL|unix.NLM_F_ECHO, m.b, func(typ uint16, b []byte) {
		if e, ok := parseTcMsg(b); ok && typ == unix.RTM_NEWTFILTER && e.ifindex == ifindex && e.parent == f.parent && e.name == name {
			f.handle = e.handle // the echo of the new filter
		}
	})
	if err == nil && f.handle == 0 {
		err = errors.New("the kernel did not echo the new filter's handle") // it always does
	}
	if err != nil {
		err = fmt.Errorf("tc attach %s: adding filter on ifindex %d: %w", name, ifindex, err)
		if f.qdisc {
			err = errors.Join(err, c.deleteQdisc(ifindex))
		}
		return nil, err
	}
	return f, nil
}

// Close deletes the filter, and the clsact qdisc if attachTC created it
// and no filter is left on either hook. It works from any network
// namespace: the netlink socket is opened in the attaching thread's one.
// A filter or qdisc already gone (interface deleted, qdisc removed by
// someone else) is not an error. Closing twice is a no-op.
func (f *tcFilter) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.netns < 0 {
		return nil
	}
	defer f.closeNetns()
	c, err := dialNetlinkIn(f.netns)
	if err != nil {
		return fmt.Errorf("tc detach: %w", err)
	}
	defer c.close()
	if f.handle == 0 { // never: with handle 0 the kernel would delete every filter at tcPrio
		return errors.New("tc detach: filter without a handle")
	}
	m := newTcMsg(f.ifindex, f.handle, f.parent, tcInfo).str(unix.TCA_KIND, "bpf")
	err = c.do(unix.RTM_DELTFILTER, 0, m.b, nil)
	if errors.Is(err, unix.EINVAL) { // also the answer when the qdisc is gone (and the filter with it)
		if ok, qerr := c.hasClsact(f.ifindex); qerr == nil && !ok {
			return nil
		}
	}
	if err != nil && !tcGone(err) {
		return fmt.Errorf("tc detach: deleting filter on ifindex %d: %w", f.ifindex, err)
	}
	if f.qdisc {
		err = c.deleteQdisc(f.ifindex)
	}
	return err
}

// tcGone reports whether err says the filter or qdisc (or interface) is gone.
func tcGone(err error) bool { return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) }

// closeNetns closes the namespace fd and marks f closed.
func (f *tcFilter) closeNetns() {
	if f.netns >= 0 {
		unix.Close(f.netns)
		f.netns = -1
	}
}

// tcFilters lists the BPF filters (their names, as TCA_BPF_NAME) on
// ifindex's ingress or egress hook in the calling thread's network
// namespace.
func tcFilters(ifindex int, egress bool) ([]string, error) {
	es, err := withConn(func(c *nlConn) ([]tcEntry, error) { return c.dump(unix.RTM_GETTFILTER, ifindex, tcHook(egress)) })
	var names []string
	for _, e := range es {
		if e.kind == "bpf" && e.handle != 0 { // handle 0: a classifier's own entry, not a filter
			names = append(names, e.name)
		}
	}
	return names, err
}

// hasClsact reports whether ifindex has a clsact qdisc, in the calling
// thread's network namespace.
func hasClsact(ifindex int) (bool, error) {
	return withConn(func(c *nlConn) (bool, error) { return c.hasClsact(ifindex) })
}

// tcHook is the filter parent of the ingress or egress hook.
func tcHook(egress bool) uint32 {
	if egress {
		return tcHClsactMaj | tcHMinEgress
	}
	return tcHClsactMaj | tcHMinIngress
}

// tcEntry is a qdisc or filter from a dump.
type tcEntry struct {
	ifindex        int
	handle, parent uint32
	kind, name     string // name: TCA_BPF_NAME of a bpf filter
}

// dump lists the qdiscs (typ RTM_GETQDISC) or filters (RTM_GETTFILTER,
// of every kind) of ifindex with the given parent. Filters: none if there
// is no clsact qdisc.
func (c *nlConn) dump(typ uint16, ifindex int, parent uint32) ([]tcEntry, error) {
	var out []tcEntry
	err := c.do(typ, unix.NLM_F_DUMP, newTcMsg(ifindex, 0, parent, 0).b, func(_ uint16, b []byte) {
		if e, ok := parseTcMsg(b); ok && e.ifindex == ifindex && e.parent == parent {
			out = append(out, e)
		}
	})
	return out, err
}

// hasClsact reports whether ifindex has a clsact qdisc.
func (c *nlConn) hasClsact(ifindex int) (bool, error) {
	qs, err := c.dump(unix.RTM_GETQDISC, ifindex, tcHClsact)
	return slices.ContainsFunc(qs, func(e tcEntry) bool { return e.kind == "clsact" }), err
}

// deleteQdisc deletes ifindex's clsact qdisc if no filter is left on it.
func (c *nlConn) deleteQdisc(ifindex int) error {
	for _, egress := range []bool{false, true} {
		if es, err := c.dump(unix.RTM_GETTFILTER, ifindex, tcHook(egress)); err != nil || len(es) > 0 {
			return err
		}
	}
	m := newTcMsg(ifindex, tcHClsactMaj, tcHClsact, 0).str(unix.TCA_KIND, "clsact")
	if err := c.do(unix.RTM_DELQDISC, 0, m.b, nil); err != nil && !tcGone(err) {
		return fmt.Errorf("tc: deleting clsact qdisc on ifindex %d: %w", ifindex, err)
	}
	return nil
}

// nlMsg builds a request body: a struct tcmsg and attributes.
type nlMsg struct{ b []byte }

// newTcMsg starts a body with a struct tcmsg (family AF_UNSPEC).
func newTcMsg(ifindex int, handle, parent, info uint32) *nlMsg {
	b := make([]byte, tcMsgLen, 128)
	nlEndian.PutUint32(b[offIfindex:], uint32(int32(ifindex)))
	nlEndian.PutUint32(b[offHandle:], handle)
	nlEndian.PutUint32(b[offParent:], parent)
	nlEndian.PutUint32(b[offInfo:], info)
	return &nlMsg{b}
}

// attr appends an attribute, padded to 4 bytes.
func (m *nlMsg) attr(typ uint16, data []byte) *nlMsg {
	m.b = nlEndian.AppendUint16(m.b, uint16(nlaHdrLen+len(data)))
	m.b = nlEndian.AppendUint16(m.b, typ)
	m.b = append(append(m.b, data...), make([]byte, nlAlign(len(data))-len(data))...)
	return m
}

func (m *nlMsg) str(typ uint16, s string) *nlMsg { return m.attr(typ, append([]byte(s), 0)) }
func (m *nlMsg) u32(typ uint16, v uint32) *nlMsg { return m.attr(typ, nlEndian.AppendUint32(nil, v)) }

// nest appends a nested attribute holding what fn appends.
func (m *nlMsg) nest(typ uint16, fn func()) {
	start := len(m.b)
	m.attr(typ|unix.NLA_F_NESTED, nil)
	fn()
	nlEndian.PutUint16(m.b[start:], uint16(len(m.b)-start))
}

func nlAlign(n int) int { return (n + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1) }

// nlAttrs reads the attributes of b by type (flags cleared), up to the
// first malformed one.
func nlAttrs(b []byte) map[uint16][]byte {
	a := map[uint16][]byte{}
	for len(b) >= nlaHdrLen {
		n := int(nlEndian.Uint16(b))
		if n < nlaHdrLen || n > len(b) {
			break
		}
		a[nlEndian.Uint16(b[2:])&^(unix.NLA_F_NESTED|unix.NLA_F_NET_BYTEORDER)] = b[nlaHdrLen:n]
		b = b[min(nlAlign(n), len(b)):]
	}
	return a
}

// parseTcMsg reads a struct tcmsg reply: its header, kind and (bpf
// filters) name. ok is false if it is too short.
func parseTcMsg(b []byte) (e tcEntry, ok bool) {
	if len(b) < tcMsgLen {
		return e, false
	}
	a := nlAttrs(b[tcMsgLen:])
	e = tcEntry{ifindex: int(int32(nlEndian.Uint32(b[offIfindex:]))), handle: nlEndian.Uint32(b[offHandle:]),
		parent: nlEndian.Uint32(b[offParent:]), kind: cString(a[unix.TCA_KIND])}
	if e.kind == "bpf" {
		e.name = cString(nlAttrs(a[unix.TCA_OPTIONS])[tcaBPFName])
	}
	return e, true
}

func cString(b []byte) string { s, _, _ := strings.Cut(string(b), "\x00"); return s }

// nlConn is a NETLINK_ROUTE socket, in the network namespace of the
// thread that opened it for its whole life.
type nlConn struct {
	fd  int
	seq uint32
	buf []byte
}

// dialNetlink opens a NETLINK_ROUTE socket with extended acks (the
// kernel's reason in errors) and a receive timeout.
func dialNetlink() (*nlConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1) // best effort: only better messages
	tv := unix.NsecToTimeval(nlTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	return &nlConn{fd: fd, seq: uint32(time.Now().UnixNano()), buf: make([]byte, nlBufSize)}, nil
}

// withConn runs fn with a socket opened in the calling thread's namespace
// (whether or not the goroutine is locked to its thread).
func withConn[T any](fn func(*nlConn) (T, error)) (T, error) {
	runtime.LockOSThread()
	c, err := dialNetlink()
	runtime.UnlockOSThread()
	if err != nil {
		var zero T
		return zero, err
	}
	defer c.close()
	return fn(c)
}

// dialNetlinkIn opens the socket in the network namespace open as nsfd:
// in the calling thread if it is there, else on a new locked thread that
// enters it with setns and goes back; if going back fails, the thread is
// left locked and so ends with its goroutine.
func dialNetlinkIn(nsfd int) (*nlConn, error) {
	var want, cur unix.Stat_t
	if err := unix.Fstat(nsfd, &want); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	if unix.Stat(threadNetns, &cur) == nil && cur.Dev == want.Dev && cur.Ino == want.Ino {
		defer runtime.UnlockOSThread()
		return dialNetlink()
	}
	runtime.UnlockOSThread()
	var c *nlConn
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open(threadNetns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			defer unix.Close(orig)
			if err = unix.Setns(nsfd, unix.CLONE_NEWNET); err == nil {
				c, err = dialNetlink()
				if unix.Setns(orig, unix.CLONE_NEWNET) != nil {
					done <- err
					return // still locked: the thread ends with the goroutine
				}
			}
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return c, <-done
}

func (c *nlConn) close() { unix.Close(c.fd) }

// do sends one request of type typ with flags (NLM_F_REQUEST and
// NLM_F_ACK added) and body, and reads the replies of its sequence number
// until the ack, or NLMSG_DONE for a dump; fn (if not nil) gets every
// other reply. An error reply is returned as its errno (wrapped, for
// errors.Is), with the kernel's message if it gave one.
func (c *nlConn) do(typ, flags uint16, body []byte, fn func(typ uint16, b []byte)) error {
	c.seq++
	req := make([]byte, nlHdrLen, nlHdrLen+len(body))
	nlEndian.PutUint32(req[0:], uint32(nlHdrLen+len(body)))
	nlEndian.PutUint16(req[4:], typ)
	nlEndian.PutUint16(req[6:], flags|unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	nlEndian.PutUint32(req[8:], c.seq)
	if err := unix.Sendto(c.fd, append(req, body...), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	for range nlMaxReads {
		n, _, rflags, from, err := unix.Recvmsg(c.fd, c.buf, nil, 0)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return fmt.Errorf("netlink: no answer in %v", nlTimeout)
		case err != nil:
			return fmt.Errorf("netlink receive: %w", err)
		case rflags&unix.MSG_TRUNC != 0:
			return errors.New("netlink: reply truncated")
		}
		if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
			continue // not from the kernel
		}
		msgs, err := syscall.ParseNetlinkMessage(c.buf[:n]) // checks every length
		if err != nil {
			return fmt.Errorf("netlink: malformed reply: %w", err)
		}
		for _, m := range msgs {
			switch h := m.Header; {
			case h.Seq != c.seq: // a late reply to an earlier request
			case h.Type == unix.NLMSG_ERROR || h.Type == unix.NLMSG_DONE:
				return nlError(h.Type, h.Flags, m.Data)
			case h.Flags&unix.NLM_F_DUMP_INTR != 0:
				return errors.New("netlink: dump interrupted by a change, try again")
			case fn != nil:
				fn(h.Type, m.Data)
			}
		}
	}
	return fmt.Errorf("netlink: no end after %d datagrams", nlMaxReads)
}

// nlError reads an ack (NLMSG_ERROR with error 0) or NLMSG_DONE: nil, or
// the errno, with the extended ack's message if any.
func nlError(typ, flags uint16, m []byte) error {
	if len(m) < 4 {
		return errors.New("netlink: short error reply")
	}
	errno := -int32(nlEndian.Uint32(m))
	if errno <= 0 {
		return nil
	}
	err := error(unix.Errno(errno))
	off := 4 // the TLVs of NLMSG_DONE; an error has the request (or its header, if capped) first
	switch {
	case typ == unix.NLMSG_ERROR && flags&unix.NLM_F_CAPPED != 0:
		off += nlHdrLen
	case typ == unix.NLMSG_ERROR && len(m) >= 4+nlHdrLen:
		off += nlAlign(int(nlEndian.Uint32(m[4:])))
	}
	if flags&unix.NLM_F_ACK_TLVS != 0 && off <= len(m) {
		if msg, ok := nlAttrs(m[off:])[unix.NLMSGERR_ATTR_MSG]; ok {
			err = fmt.Errorf("%w (%s)", err, cString(msg))
		}
	}
	return err
}
