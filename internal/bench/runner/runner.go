//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weir-dev/weir/internal/bench/engine"
	"github.com/weir-dev/weir/internal/bench/profile"
	"github.com/weir-dev/weir/internal/bench/result"
	"github.com/weir-dev/weir/internal/testhost"
)

// hosts are the run's test hosts.
type hosts struct {
	prim, sec *testhost.Net
	server    [2]*testhost.Host // by profile.Network
	clients   [][2]*testhost.Host
}

func (h *hosts) close() error {
	var errs []error
	if h.sec != nil {
		errs = append(errs, h.sec.Close())
	}
	if h.prim != nil {
		errs = append(errs, h.prim.Close())
	}
	return errors.Join(errs...)
}

func (c *Config) logf(format string, a ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "weir bench: "+format+"\n", a...)
	}
}

// Run runs the profile and returns its record. The hosts are removed
// before it returns, whatever happened.
func Run(ctx context.Context, cfg Config) (run *result.Run, err error) {
	if cfg.Profile == nil || cfg.Child == nil {
		return nil, errors.New("runner: no profile or no child command")
	}
	if cfg.Pairs < 1 || cfg.Pairs > testhost.MaxHosts-1 {
		return nil, fmt.Errorf("runner: %d pairs, want 1..%d", cfg.Pairs, testhost.MaxHosts-1)
	}
	if cfg.BasePort == 0 {
		cfg.BasePort = 20000
	}
	if len(cfg.Observe) > 0 {
		cfg.Offloads = false
	}
	plan := engine.Plan{Profile: cfg.Profile, Pairs: cfg.Pairs, BasePort: cfg.BasePort}
	if err := plan.Check(); err != nil {
		return nil, err
	}
	if cfg.Hub == 0 {
		cfg.Hub = testhost.Bridge
	}
	run = &result.Run{
		Schema: result.Schema, WeirVersion: cfg.Version, Started: time.Now().UTC(),
		ProfileFile: cfg.ProfileFile, Profile: cfg.Profile, Host: hostFacts(),
		Options: result.Options{Pairs: cfg.Pairs, Hub: cfg.Hub.String(), Offloads: cfg.Offloads, MTU: 1500,
			Observe: cfg.Observe, Strict: cfg.Strict, Calibrate: cfg.Calibrate},
	}
	h, err := buildHosts(ctx, &cfg)
	defer func() {
		if cerr := h.close(); cerr != nil && err == nil {
			err = fmt.Errorf("removing the test hosts: %w", cerr)
		}
	}()
	if err != nil {
		return nil, err
	}
	run.Options.Secondary = h.sec != nil
	if err := traffic(ctx, &cfg, plan, h, run); err != nil {
		return run, err
	}
	if cfg.Calibrate {
		run.Calibrate = runCalibration(ctx, &cfg, h)
	}
	if cfg.Strict {
		for _, o := range run.Observe {
			if !o.OK {
				return run, fmt.Errorf("%w: %s on %s: %d of %d connections match (%s)", ErrDifference, o.Mode, o.Where, o.Matched, o.Conns, strings.Join(first(o.Diffs, 3), "; "))
			}
		}
	}
	return run, nil
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// buildHosts makes the server host and one client host per pair, with the
// second network when wanted, offloads as configured.
func buildHosts(ctx context.Context, cfg *Config) (*hosts, error) {
	h := &hosts{}
	var err error
	cfg.logf("building %d test hosts (%s)", cfg.Pairs+1, cfg.Hub)
	if h.prim, err = testhost.OpenNet(ctx, cfg.Hub, cfg.Pairs+1); err != nil {
		return h, err
	}
	h.server[profile.Primary] = h.prim.Hosts[0]
	h.clients = make([][2]*testhost.Host, cfg.Pairs)
	for i := range cfg.Pairs {
		h.clients[i][profile.Primary] = h.prim.Hosts[i+1]
	}
	if cfg.Secondary || cfg.Profile.UsesSecondary() {
		cfg.logf("building the second network")
		if h.sec, err = testhost.OpenNet(ctx, testhost.Bridge, 0); err != nil {
			return h, err
		}
		if h.server[profile.Secondary], err = h.sec.Join(ctx, h.server[profile.Primary]); err != nil {
			return h, err
		}
		for i := range h.clients {
			if h.clients[i][profile.Secondary], err = h.sec.Join(ctx, h.clients[i][profile.Primary]); err != nil {
				return h, err
			}
		}
	}
	for _, c := range h.clients {
		// Connection loops leave TIME_WAIT sockets on the client: let new
		// connections reuse their ports.
		if err := c[0].Do(func() error { return os.WriteFile("/proc/sys/net/ipv4/tcp_tw_reuse", []byte("1"), 0) }); err != nil {
			return h, err
		}
	}
	if !cfg.Offloads {
		if err := offloadsOff(ctx, h); err != nil {
			return h, err
		}
	}
	return h, nil
}

// offloadsOff turns segmentation and receive offloads off on every
// interface of the run, so that a packet on the wire, a packet every hook
// sees and a TCP segment as the kernel counts them are the same thing.
func offloadsOff(ctx context.Context, h *hosts) error {
	type dev struct {
		host  *testhost.Host
		iface string
	}
	var devs []dev
	for _, n := range []*testhost.Net{h.prim, h.sec} {
		if n == nil {
			continue
		}
		for _, x := range n.Hosts {
			devs = append(devs, dev{x, x.Iface}, dev{n.Hub, n.HubIface(x)})
		}
	}
	ethtool, err := exec.LookPath("ethtool")
	if err != nil {
		return fmt.Errorf("turning offloads off needs ethtool (apt-get install ethtool): %w", err)
	}
	for _, d := range devs {
		if out, err := d.host.Exec(ctx, ethtool, "-K", d.iface, "tso", "off", "gso", "off", "gro", "off"); err != nil {
			return fmt.Errorf("ethtool -K %s: %v: %s", d.iface, err, out)
		}
		// Without offloads the device segments what TCP hands it, after the
		// egress hooks (TCX, netfilter) saw one large packet: one segment
		// per packet from the start makes every hook see what the wire sees.
		if out, err := d.host.Exec(ctx, "ip", "link", "set", "dev", d.iface, "gso_max_segs", "1"); err != nil {
			return fmt.Errorf("ip link set %s gso_max_segs 1: %v: %s", d.iface, err, out)
		}
	}
	return nil
}

// child is one running child process.
type child struct {
	cmd    *exec.Cmd
	in     *lineWriter
	inPipe io.WriteCloser
	stderr *testhost.SyncBuffer
	done   chan error // readLines' end
}

// startChild runs the bench child with role in h's namespace; fn gets
// every line it writes.
func startChild(cfg *Config, h *testhost.Host, role string, fn func(*msg) error) (*child, error) {
	exe, args := cfg.Child(role)
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.Name, exe}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c := &child{cmd: cmd, stderr: &testhost.SyncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = c.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.in, c.inPipe = &lineWriter{w: in}, in
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the %s: %w", role, err)
	}
	go func() { c.done <- readLines(out, fn) }()
	return c, nil
}

// end closes the child's input, waits for it (killing it after grace) and
// returns its CPU time.
func (c *child) end(grace time.Duration) (user, sys time.Duration, err error) {
	c.inPipe.Close()
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	select {
	case err = <-exited:
	case <-time.After(grace):
		_ = c.cmd.Process.Kill() // it may have exited just now; exited says how
		err = <-exited
		if err == nil {
			err = errors.New("killed")
		}
	}
	if st := c.cmd.ProcessState; st != nil {
		if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
			user = time.Duration(ru.Utime.Nano())
			sys = time.Duration(ru.Stime.Nano())
		}
	}
	if err != nil {
		err = fmt.Errorf("%v: %s", err, strings.TrimSpace(c.stderr.String()))
	}
	return user, sys, err
}

// addrs returns h's addresses on both networks.
func addrs(h [2]*testhost.Host) [2]engine.Addrs {
	var a [2]engine.Addrs
	for i, x := range h {
		if x != nil {
			a[i] = engine.Addrs{V4: x.Addr4, V6: x.Addr6}
		}
	}
	return a
}

// traffic runs the profile once on the hosts and fills run's measurements.
func traffic(ctx context.Context, cfg *Config, plan engine.Plan, h *hosts, run *result.Run) error {
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 3*plan.Profile.TotalDuration() + time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var obs []*observer
	defer func() {
		for _, o := range obs {
			o.kill()
		}
	}()
	for _, mode := range cfg.Observe {
		o, err := startObserver(ctx, cfg, mode, h)
		if err != nil {
			return err
		}
		obs = append(obs, o)
	}

	// The server.
	var (
		mu        sync.Mutex
		clients   = make([]*child, cfg.Pairs)
		results   = make([]*engine.ClientResult, cfg.Pairs)
		srvRes    *engine.ServerResult
		ready     = make(chan string, 1)
		gotServer = make(chan struct{})
		owner     = map[uint64]stopOwner{} // relayed stop id → the client's call
		nextID    uint64
	)
	srv, err := startChild(cfg, h.server[0], "server", func(m *msg) error {
		switch {
		case m.Ready:
			ready <- ""
		case m.Error != "":
			select {
			case ready <- m.Error:
			default:
			}
		case m.Reply != nil:
			mu.Lock()
			o, ok := owner[m.Reply.ID]
			delete(owner, m.Reply.ID)
			c := clients[o.pair]
			mu.Unlock()
			if ok && c != nil {
				r := *m.Reply
				r.ID = o.id // the client's own number for its call
				return c.in.send(&msg{Reply: &r})
			}
		case m.Server != nil:
			mu.Lock()
			srvRes = m.Server
			mu.Unlock()
			close(gotServer)
		}
		return nil
	})
	if err != nil {
		return err
	}
	srvDone := false
	defer func() {
		if !srvDone {
			_, _, _ = srv.end(time.Second) // cleanup after the error already returned
		}
	}()
	if err := srv.in.send(&msg{Plan: &plan}); err != nil {
		return err
	}
	select {
	case why := <-ready:
		if why != "" {
			return fmt.Errorf("server: %s", why)
		}
	case err := <-srv.done:
		return fmt.Errorf("server ended before it was ready: %v: %s", err, srv.stderr.String())
	case <-ctx.Done():
		return fmt.Errorf("server not ready: %w", ctx.Err())
	}

	// Counters before, then the clients, started together at t0.
	type nic struct {
		role, net string
		host      *testhost.Host
		before    nicCounters
	}
	var nics []*nic
	add := func(role string, hh [2]*testhost.Host) {
		for n, x := range hh {
			if x != nil {
				nics = append(nics, &nic{role: role, net: profile.Network(n).String(), host: x})
			}
		}
	}
	add("server", h.server)
	for i, c := range h.clients {
		add(fmt.Sprintf("client%d", i+1), c)
	}
	for _, n := range nics {
		if n.before, err = readNIC(n.host, n.host.Iface); err != nil {
			return err
		}
	}
	if err := srv.in.send(&msg{Start: true}); err != nil {
		return err
	}
	t0 := time.Now().Add(100 * time.Millisecond)
	cfg.logf("running %q: %d pair(s), %d thread(s) each", plan.Profile.Name, cfg.Pairs, plan.Profile.Threads())
	interval := max(100*time.Millisecond, plan.Profile.TotalDuration()/200)
	for i := range cfg.Pairs {
		pair := i
		c, err := startChild(cfg, h.clients[i][0], "client", func(m *msg) error {
			switch {
			case m.Stop != nil:
				mu.Lock()
				nextID++
				id := nextID
				owner[id] = stopOwner{pair, m.Stop.ID}
				mu.Unlock()
				s := *m.Stop
				s.ID = id
				return srv.in.send(&msg{Stop: &s})
			case m.Result != nil:
				mu.Lock()
				results[pair] = m.Result
				mu.Unlock()
			case m.Error != "":
				return errors.New(m.Error)
			}
			return nil
		})
		if err != nil {
			return err
		}
		mu.Lock()
		clients[i] = c
		mu.Unlock()
		spec := &clientSpec{Plan: plan, Pair: i, Local: addrs(h.clients[i]), Server: addrs(h.server), T0: t0.UnixNano(), Interval: interval}
		if err := c.in.send(&msg{Client: spec}); err != nil {
			return err
		}
	}
	var errs []string
	var cliUser, cliSys time.Duration
	for i, c := range clients {
		select {
		case err := <-c.done:
			if err != nil {
				errs = append(errs, fmt.Sprintf("client %d: %v", i+1, err))
			}
		case <-ctx.Done():
			errs = append(errs, fmt.Sprintf("client %d: %v", i+1, ctx.Err()))
		}
		u, s, err := c.end(5 * time.Second)
		if err != nil {
			errs = append(errs, fmt.Sprintf("client %d: %v", i+1, err))
		}
		cliUser, cliSys = cliUser+u, cliSys+s
	}
	end := time.Now()
	for _, n := range nics {
		after, err := readNIC(n.host, n.host.Iface)
		if err != nil {
			return err
		}
		run.NICs = append(run.NICs, nicStats(n.role, n.host, n.net, n.before, after, end.Sub(t0).Seconds()))
	}
	_ = srv.in.send(&msg{Finish: true}) // a server that is gone shows as srv.done below
	select {
	case <-gotServer:
	case <-srv.done: //nolint:errcheck // its exit error comes from srv.end below
	case <-time.After(10 * time.Second):
		errs = append(errs, "server: no totals within 10 s")
	}
	srvUser, srvSys, err := srv.end(5 * time.Second)
	srvDone = true
	if err != nil {
		errs = append(errs, fmt.Sprintf("server: %v", err))
	}
	for _, r := range results {
		if r == nil {
			continue
		}
		errs = append(errs, r.Errors...)
		run.Conns = append(run.Conns, r.Conns...)
		if r.ConnsLeft > 0 {
			errs = append(errs, fmt.Sprintf("pair %d: %d connections beyond the %d recorded", r.Pair, r.ConnsLeft, engine.MaxConnRecords))
		}
	}
	if srvRes != nil {
		errs = append(errs, srvRes.Errors...)
		markRetrans(run.Conns, srvRes.Retrans)
	}
	run.Txns, run.Ops, run.Intervals, run.Elapsed = engine.Aggregate(plan.Profile, results)
	secs := run.Elapsed.Seconds()
	cpu := func(side string, u, s time.Duration) result.SideCPU {
		c := result.SideCPU{Side: side, User: u, System: s}
		if secs > 0 {
			c.Percent = 100 * (u + s).Seconds() / secs
		}
		return c
	}
	run.CPU = []result.SideCPU{cpu("server", srvUser, srvSys), cpu("clients", cliUser, cliSys)}
	for _, o := range obs {
		run.Observe = append(run.Observe, o.finish(run, srvRes))
	}
	run.Errors = append(run.Errors, errs...)
	for _, r := range results {
		if r == nil {
			return fmt.Errorf("a client gave no result: %s", strings.Join(errs, "; "))
		}
	}
	return nil
}

// markRetrans adds the server's retransmissions to the connections: their
// packets are still counted by the client's kernel, their bytes are not
// predictable any more (duplicate data, D-SACK blocks).
func markRetrans(conns []result.ConnStats, rt []engine.ServerRetrans) {
	if len(rt) == 0 {
		return
	}
	by := map[string]uint64{}
	for _, r := range rt {
		by[r.Client] += r.Segments
	}
	for i := range conns {
		if n := by[conns[i].Client]; n > 0 && conns[i].Proto == "tcp" {
			conns[i].Retransmits += n
			conns[i].Exact = false
		}
	}
}

// stopOwner is the client call a relayed stop answers.
type stopOwner struct {
	pair int
	id   uint64
}
