//go:build linux

package ebpf

import (
	"errors"
	"fmt"
	"io"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/netdev"
)

// Interfaces come and go (containers' veths): each watched namespace has a
// netdev.Watcher, and Run attaches the programs to a matching interface
// that appears or comes up, and forgets one that is deleted (the kernel
// detaches TCX links and clsact filters with the device; closing ours
// frees them). Attaching and detaching happen in the Run goroutine
// between drains, so the drain never sees the interface maps change.

// netState is one watched namespace.
type netState struct {
	Netns
	cookie  uint64 // SO_NETNS_COOKIE: what the programs see
	watcher *netdev.Watcher
}

// ifAttach names an attached interface: namespace (index of nets) and
// ifindex.
type ifAttach struct {
	ns      int
	ifindex int
}

// nsEvent is a link change in namespace ns; a zero Link.Index asks for
// a re-list (the watcher overran).
type nsEvent struct {
	ns int
	ev netdev.Event
}

// attach subscribes to link changes in each namespace, attaches the
// programs to every interface the selector matches there, starts a
// goroutine per namespace forwarding changes to s.events, and attaches
// the drop program.
func (s *Source) attach() error {
	s.nets = make([]netState, len(s.cfg.Netns))
	for i, ns := range s.cfg.Netns {
		n := &s.nets[i]
		n.Netns = ns
		err := ns.Do(func() (err error) {
			if n.cookie, err = netnsCookie(); err != nil {
				return err
			}
			if err := s.watch(n.cookie); err != nil {
				return err
			}
			// Subscribed before listing: no interface slips between the two.
			if n.watcher, err = netdev.Watch(); err != nil {
				return fmt.Errorf("ebpf: watching interfaces: %w", err)
			}
			for _, l := range n.watcher.Initial() {
				if err := s.attachIface(i, l); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for i := range s.nets {
		go s.forward(i, s.nets[i].watcher)
	}
	s.countIfaces()
	return s.attachDrops()
}

// forward sends w's changes to s.events until w is closed.
func (s *Source) forward(ns int, w *netdev.Watcher) {
	for {
		ev, err := w.Next()
		if errors.Is(err, netdev.ErrOverrun) {
			ev = netdev.Event{} // some changes were lost: re-list
		} else if err != nil {
			if !errors.Is(err, netdev.ErrClosed) {
				s.cfg.Logf("ebpf: watching interfaces stopped: %v", err)
			}
			return
		}
		select {
		case s.events <- nsEvent{ns, ev}:
		case <-s.quit:
			return
		}
	}
}

// linkEvent applies one link change (Run goroutine).
func (s *Source) linkEvent(e nsEvent) {
	n := &s.nets[e.ns]
	if n.watcher == nil {
		return // detached: shutting down
	}
	l := e.ev.Link
	switch {
	case l.Index == 0:
		links, err := n.watcher.List()
		if err != nil {
			s.cfg.Logf("ebpf: re-listing interfaces: %v", err)
			return
		}
		have := map[int]bool{}
		for _, l := range links {
			have[l.Index] = true
			s.consider(e.ns, l)
		}
		for k := range s.on {
			if k.ns == e.ns && !have[k.ifindex] {
				s.detachIface(k)
			}
		}
	case e.ev.Deleted:
		s.detachIface(ifAttach{e.ns, l.Index})
	default:
		s.consider(e.ns, l)
	}
	s.countIfaces()
}

// consider attaches to l if it matches and is not attached yet, and
// follows a rename.
func (s *Source) consider(ns int, l netdev.Link) {
	n := &s.nets[ns]
	if _, ok := s.on[ifAttach{ns, l.Index}]; ok {
		s.ifaces[ifKey{n.cookie, uint32(l.Index)}] = s.names.Index(s.ifName(n, l.Name))
		return
	}
	if !s.cfg.Select.Match(l) {
		return
	}
	if err := n.Do(func() error { return s.attachIface(ns, l) }); err != nil {
		s.cfg.Logf("%v", err) // the interface may be gone already; the source goes on
	}
}

// ifName is the name records give interface name of namespace n.
func (s *Source) ifName(n *netState, name string) string {
	if n.Name == "" {
		return name
	}
	return n.Name + "/" + name
}

// attachIface puts the programs on ingress and egress of l if the
// selector matches it; it runs in l's namespace.
func (s *Source) attachIface(ns int, l netdev.Link) error {
	if !s.cfg.Select.Match(l) {
		return nil
	}
	ing, eg := s.coll.Programs["weir_flow_eth_ingress"], s.coll.Programs["weir_flow_eth_egress"]
	if l.Type != unix.ARPHRD_ETHER {
		ing, eg = s.coll.Programs["weir_flow_ip_ingress"], s.coll.Programs["weir_flow_ip_egress"]
	}
	var links []io.Closer
	for _, a := range []struct {
		p      *ebpf.Program
		t      ebpf.AttachType
		egress bool
	}{{ing, ebpf.AttachTCXIngress, false}, {eg, ebpf.AttachTCXEgress, true}} {
		if !s.tc {
			lk, err := link.AttachTCX(link.TCXOptions{Interface: l.Index, Program: a.p, Attach: a.t})
			if err == nil {
				links = append(links, lk)
				continue
			}
			if !errors.Is(err, ebpf.ErrNotSupported) || s.cfg.Attach == AttachTCX {
				closeAll(s.cfg.Logf, links)
				return fmt.Errorf("ebpf: attaching to %s: %w", l.Name, err)
			}
			s.cfg.Logf("ebpf: no TCX in this kernel: attaching with clsact filters")
			s.tc = true
		}
		f, err := attachTC(l.Index, a.p, a.egress, "weir")
		if err != nil {
			closeAll(s.cfg.Logf, links)
			return fmt.Errorf("ebpf: attaching a clsact filter to %s: %w", l.Name, err)
		}
		links = append(links, f)
	}
	n := &s.nets[ns]
	s.on[ifAttach{ns, l.Index}] = links
	s.ifaces[ifKey{n.cookie, uint32(l.Index)}] = s.names.Index(s.ifName(n, l.Name))
	return nil
}

// detachIface closes an interface's links or filters. Its name stays
// known until the next drain (entries of it may still be in the map).
func (s *Source) detachIface(k ifAttach) {
	links, ok := s.on[k]
	if !ok {
		return
	}
	closeAll(s.cfg.Logf, links)
	delete(s.on, k)
	s.gone = append(s.gone, ifKey{s.nets[k.ns].cookie, uint32(k.ifindex)})
}

// forgetGone drops the names of interfaces deleted before the last drain
// (unless one with the same ifindex was attached since).
func (s *Source) forgetGone() {
	for _, k := range s.gone {
		attached := false
		for a := range s.on {
			attached = attached || s.nets[a.ns].cookie == k.netns && uint32(a.ifindex) == k.ifindex
		}
		if !attached {
			delete(s.ifaces, k)
		}
	}
	s.gone = s.gone[:0]
}

// countIfaces publishes the number of attached interfaces.
func (s *Source) countIfaces() {
	s.mu.Lock()
	s.stats.Ifaces = len(s.on)
	s.mu.Unlock()
}

// closeAll closes cs last first (a clsact qdisc weir created goes with
// the last filter on it), logging failures.
func closeAll(logf func(string, ...any), cs []io.Closer) {
	for i := len(cs) - 1; i >= 0; i-- {
		if err := cs[i].Close(); err != nil {
			logf("ebpf: detaching: %v", err)
		}
	}
}
