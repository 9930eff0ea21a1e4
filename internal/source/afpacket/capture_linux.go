//go:build linux

package afpacket

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/netdev"
	"github.com/weir-dev/weir/internal/sink"
)

// Capture is a running live capture. Create it with New, run it with Run;
// Stats and Top may be called from any goroutine while it runs.
type Capture struct {
	cfg     Config
	workers []*worker
	dead    chan *Source
	watcher *netdev.Watcher // set by Run
	started atomic.Bool     // Run was called: the workers close their sockets

	mu        sync.Mutex
	open      map[int]*iface       // by ifindex: interfaces being captured
	kernel    map[string]RingStats // final counters of released, closed sockets, by interface name
	releasing []*Source            // released sockets their workers may not have closed yet

	opened, released, openFails atomic.Uint64
}

// iface is one captured interface: one socket per worker.
type iface struct {
	link netdev.Link
	srcs []*Source // srcs[i] belongs to worker i
}

// New checks cfg and builds the workers and their tables (preallocated:
// memory is spent here, not while capturing).
func New(cfg Config) (*Capture, error) {
	c, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	cp := &Capture{cfg: c, dead: make(chan *Source, 64), open: map[int]*iface{},
		kernel: map[string]RingStats{},
	}
	for i := range c.Workers {
		w, err := newWorker(i, &cp.cfg, cp.dead)
		if err != nil {
			for _, w := range cp.workers {
				_ = w.set.Close()
			}
			return nil, err
		}
		cp.workers = append(cp.workers, w)
	}
	return cp, nil
}

// Run captures until ctx is cancelled, then flushes every flow (reason
// shutdown) to the sink and returns. It returns early with an error if the
// interfaces cannot be listed or watched, if an interface named explicitly
// does not exist (ErrNoInterface), or if the first interfaces cannot be
// opened (for example without CAP_NET_RAW).
//
// out receives every record; several workers write to it at once, so it
// must be safe for concurrent use (sink.Queue is).
func (c *Capture) Run(ctx context.Context, out sink.Sink) error {
	c.started.Store(true)
	for _, w := range c.workers {
		w.shard.SetSink(out)
	}
	if c.cfg.Views != nil && c.cfg.ViewInterval > 0 {
		vctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); c.views(vctx) }()
		defer func() { cancel(); <-done }()
	}
	err := c.run(ctx)
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		err = fmt.Errorf("%w\nlive capture needs root or the capabilities CAP_NET_RAW and CAP_NET_ADMIN:\n"+
			"  run it with sudo, or once: sudo setcap cap_net_raw,cap_net_admin=eip %s", err, os.Args[0])
	}
	return err
}

func (c *Capture) run(ctx context.Context) error {
	var watcher *netdev.Watcher
	err := c.cfg.Netns(func() (err error) {
		watcher, err = netdev.Watch() // its netlink sockets stay in this namespace
		return err
	})
	if err != nil {
		return fmt.Errorf("afpacket: interfaces: %w", err)
	}
	defer watcher.Close()
	c.watcher = watcher
	links := watcher.Initial() // listed after subscribing: no link slips between the two
	if err := c.checkNamed(links); err != nil {
		return err
	}
	named := map[string]bool{}
	for _, n := range c.cfg.Select.Names() {
		named[n] = true
	}
	for _, l := range links {
		if err := c.consider(l); err != nil {
			// A named interface, or missing privilege, ends capture at
			// once; an interface matched by any or a pattern that cannot
			// be captured (an unsupported link type) is skipped.
			if named[l.Name] || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
				c.closeAll()
				return err
			}
			c.cfg.Logf("skipping %s: %v", l.Name, err)
		}
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, len(c.workers))
	for i, w := range c.workers {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = w.run(stop) }()
	}
	if c.cfg.Ready != nil {
		var names []string
		c.mu.Lock()
		for _, f := range c.open {
			names = append(names, f.link.Name)
		}
		c.mu.Unlock()
		sort.Strings(names)
		c.cfg.Ready(names)
	}
	events := make(chan netdev.Event, 64)
	watchErr := make(chan error, 1)
	go func() {
		for {
			ev, err := watcher.Next()
			if errors.Is(err, netdev.ErrOverrun) {
				ev = netdev.Event{Link: netdev.Link{Index: -1}} // re-list
			} else if err != nil {
				watchErr <- err
				return
			}
			select {
			case events <- ev:
			case <-stop:
				return
			}
		}
	}()

	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-watchErr:
			if !errors.Is(err, netdev.ErrClosed) {
				runErr = fmt.Errorf("afpacket: watching interfaces: %w", err)
			}
			break loop
		case ev := <-events:
			if ev.Link.Index < 0 {
				c.relist()
				continue
			}
			if ev.Deleted || !ev.Link.Up {
				c.release(ev.Link.Index)
				continue
			}
			if err := c.consider(ev.Link); err != nil { // counted; capture goes on
				c.cfg.Logf("%v", err)
			}
		case src := <-c.dead:
			c.cfg.Logf("%s stopped delivering packets; reopening it if it is still there", src.Iface())
			c.failed(src)
		}
	}
	close(stop)
	for _, w := range c.workers {
		w.set.Wake()
	}
	wg.Wait()
	c.mu.Lock()
	for idx := range c.open {
		c.dropIface(idx, false)
	}
	c.mu.Unlock()
	return errors.Join(append([]error{runErr}, errs...)...)
}

// checkNamed fails if a plainly named interface is missing.
func (c *Capture) checkNamed(links []netdev.Link) error {
	have := map[string]bool{}
	for _, l := range links {
		have[l.Name] = true
	}
	for _, n := range c.cfg.Select.Names() {
		if !have[n] {
			return fmt.Errorf("%w %q (see 'ip link')", ErrNoInterface, n)
		}
	}
	return nil
}

// consider opens l if it matches, is up and is not open yet. Failures are
// counted; the error is returned for the caller to decide.
func (c *Capture) consider(l netdev.Link) error {
	if !l.Up || !c.cfg.Select.Match(l) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.open[l.Index]; ok {
		if old.link.Name == l.Name {
			return nil
		}
		c.dropIface(l.Index, true) // renamed: reopen under the new name
	}
	var prog []Instruction
	if c.cfg.Filter != nil {
		var err error
		if prog, err = c.cfg.Filter(l); err != nil {
			c.openFails.Add(1)
			return fmt.Errorf("afpacket: filter for %s: %w", l.Name, err)
		}
	}
	srcs := make([]*Source, 0, len(c.workers))
	for i := range c.workers {
		rc := c.cfg.Ring
		rc.Iface, rc.Filter = l.Name, prog
		if len(c.workers) > 1 {
			// The first socket lets the kernel pick an unused group id, so
			// two captures on one interface never join each other's group;
			// the others join that id.
			rc.Fanout = &Fanout{Mode: FanoutHash | FanoutFlagUniqueID}
			if i > 0 {
				g, _ := srcs[0].FanoutGroup()
				rc.Fanout = &Fanout{Group: g, Mode: FanoutHash}
			}
		}
		var s *Source
		err := c.cfg.Netns(func() (err error) { s, err = Open(rc); return err })
		if err != nil {
			for _, s := range srcs {
				_ = s.Close()
			}
			c.openFails.Add(1)
			return fmt.Errorf("afpacket: open %s (worker %d): %w", l.Name, i, err)
		}
		srcs = append(srcs, s)
	}
	// Sockets joined the fanout group in worker order, so member i is
	// worker i for every interface: the same hash picks the same worker.
	for i, w := range c.workers {
		w.send(ctlMsg{kind: ctlAdd, src: srcs[i]})
	}
	c.open[l.Index] = &iface{link: l, srcs: srcs}
	c.opened.Add(1)
	return nil
}

// release stops capturing interface index idx, if it is captured.
func (c *Capture) release(idx int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropIface(idx, true)
}

// dropIface hands the sockets of idx back to their workers for closing
// (or closes them itself when the workers have stopped); mu is held.
func (c *Capture) dropIface(idx int, running bool) {
	f, ok := c.open[idx]
	if !ok {
		return
	}
	delete(c.open, idx)
	for i, s := range f.srcs {
		if running {
			// The worker closes it; its final kernel counters are read
			// at Close, so they are folded in once it is closed.
			c.releasing = append(c.releasing, s)
			c.workers[i].send(ctlMsg{kind: ctlRemove, src: s})
		} else {
			_ = s.Close()
			c.fold(s)
		}
	}
	c.released.Add(1)
}

// fold adds the final counters of closed socket s to its interface's
// released totals; mu is held.
func (c *Capture) fold(s *Source) {
	if st, err := s.Stats(); err == nil {
		k := c.kernel[s.Iface()]
		addKernel(&k, &st)
		c.kernel[s.Iface()] = k
	}
}

// settle folds the released sockets their workers have closed by now and
// returns the ones still closing; mu is held.
func (c *Capture) settle() []*Source {
	keep := c.releasing[:0]
	for _, s := range c.releasing {
		if s.Closed() {
			c.fold(s)
		} else {
			keep = append(keep, s)
		}
	}
	clear(c.releasing[len(keep):])
	c.releasing = keep
	return keep
}

func addKernel(dst, s *RingStats) {
	dst.Packets += s.Packets
	dst.Drops += s.Drops
	dst.FreezeQueue += s.FreezeQueue
	dst.Corrupt += s.Corrupt
}

// failed releases the interface of a socket that reported an error, and
// reopens it if it is still there and matching.
func (c *Capture) failed(src *Source) {
	c.mu.Lock()
	idx := -1
	for i, f := range c.open {
		for _, s := range f.srcs {
			if s == src {
				idx = i
			}
		}
	}
	if idx >= 0 {
		c.dropIface(idx, true)
	}
	c.mu.Unlock()
	c.relist()
}

// relist reconciles the open interfaces with the current links.
func (c *Capture) relist() {
	links, err := c.watcher.List()
	if err != nil {
		return
	}
	present := map[int]bool{}
	for _, l := range links {
		if l.Up && c.cfg.Select.Match(l) {
			present[l.Index] = true
		}
	}
	c.mu.Lock()
	for idx := range c.open {
		if !present[idx] {
			c.dropIface(idx, true)
		}
	}
	c.mu.Unlock()
	for _, l := range links {
		_ = c.consider(l)
	}
}

// Close releases the workers' sockets when Run never ran (Run releases
// them itself).
func (c *Capture) Close() error {
	if !c.started.Load() {
		for _, w := range c.workers {
			_ = w.set.Close()
		}
	}
	return nil
}

func (c *Capture) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for idx := range c.open {
		c.dropIface(idx, false)
	}
	for _, w := range c.workers {
		for len(w.ctl) > 0 { // never delivered: the workers did not start
			if m := <-w.ctl; m.kind == ctlAdd {
				_ = m.src.Close()
			}
		}
		_ = w.set.Close()
	}
}

// Stats sums the workers' last published counters with the kernel's
// counters of every socket.
func (c *Capture) Stats() Stats {
	st := Stats{Workers: len(c.workers), Opened: c.opened.Load(), Released: c.released.Load(), OpenFails: c.openFails.Load()}
	by := map[string]*IfaceStats{}
	get := func(name string) *IfaceStats {
		if s, ok := by[name]; ok {
			return s
		}
		s := &IfaceStats{Name: name}
		by[name] = s
		return s
	}
	for _, w := range c.workers {
		w.mu.Lock()
		st.Decoder.Add(&w.snap.dec)
		st.Table.Add(&w.snap.table)
		st.Flows += w.snap.flows
		st.Records += w.snap.records
		for name, v := range w.snap.ifaces {
			s := get(name)
			s.Packets += v[0]
			s.Bytes += v[1]
		}
		w.mu.Unlock()
		st.TableCap += w.shard.TableCap()
		st.TableMem += w.shard.TableMemory()
	}
	c.mu.Lock()
	closing := c.settle()
	for name, k := range c.kernel {
		get(name).Kernel = k
	}
	add := func(src *Source) {
		if k, err := src.Stats(); err == nil {
			addKernel(&get(src.Iface()).Kernel, &k)
		}
	}
	for _, src := range closing {
		add(src)
	}
	for _, f := range c.open {
		get(f.link.Name).Open = true
		for _, src := range f.srcs {
			add(src)
		}
	}
	c.mu.Unlock()
	for _, s := range by {
		st.Ifaces = append(st.Ifaces, *s)
	}
	sort.Slice(st.Ifaces, func(i, j int) bool { return st.Ifaces[i].Name < st.Ifaces[j].Name })
	return st
}

// Top returns the n largest flows live in the tables now, by bytes both
// ways (current records: since the flow started or its last active report).
// It waits for every worker's answer, or for ctx.
func (c *Capture) Top(ctx context.Context, n int) ([]flow.Record, error) {
	var all []flow.Record
	replies := make([]chan []flow.Record, len(c.workers))
	for i, w := range c.workers {
		replies[i] = make(chan []flow.Record, 1)
		w.send(ctlMsg{kind: ctlPeek, n: n, reply: replies[i]})
	}
	for _, r := range replies {
		select {
		case recs := <-r:
			all = append(all, recs...)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return topN(all, n), nil
}
