package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/weir-dev/weir/internal/bench/profile"
	"github.com/weir-dev/weir/internal/bench/result"
)

// ClientConfig is one client process: pair Pair of Plan.
type ClientConfig struct {
	Plan   Plan
	Pair   int
	Local  [2]Addrs // this host's addresses, by profile.Network
	Server [2]Addrs // the server's
	Stop   Stopper
	// T0 and Interval slice the traffic into result.Intervals; T0 should
	// be the same in every client process of a run.
	T0       time.Time
	Interval time.Duration
}

// errAborted ends a thread when the run's context is done.
var errAborted = errors.New("run aborted")

// RunClient runs every thread of the profile for one pair and returns what
// they measured. It returns when all threads are done or ctx is done (then
// with what was measured so far and an error noted in the result).
func RunClient(ctx context.Context, cfg *ClientConfig) *ClientResult {
	p := cfg.Plan.Profile
	res := &ClientResult{Pair: cfg.Pair}
	if cfg.Interval <= 0 {
		cfg.Interval = 250 * time.Millisecond
	}
	if cfg.T0.IsZero() {
		cfg.T0 = time.Now()
	}
	var threads []*cthread
	for gi := range p.Groups {
		g := &p.Groups[gi]
		info := analyse(g)
		for ti := range g.Threads {
			threads = append(threads, newCThread(ctx, cfg, Key{cfg.Pair, gi, ti}, g, info))
		}
	}
	done := make(chan struct{})
	var sampled []result.Interval
	var swg sync.WaitGroup
	swg.Add(1)
	go func() { // interval sampler
		defer swg.Done()
		sampled = sample(cfg, threads, done)
	}()
	res.Start = time.Now().UnixNano()
	var wg sync.WaitGroup
	for _, t := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.run()
		}()
	}
	wg.Wait()
	res.End = time.Now().UnixNano()
	close(done)
	swg.Wait()
	res.Intervals = sampled
	type tk struct{ g, t int }
	type ok struct{ g, t, o int }
	txns := map[tk]*TxnResult{}
	ops := map[ok]*OpResult{}
	for _, t := range threads {
		if t.err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("pair %d group %d thread %d: %v", t.key.Pair, t.key.Group, t.key.Thread, t.err))
		}
		for ti := range t.g.Txns {
			s := &t.txns[ti]
			if s.Start == 0 {
				continue
			}
			a := txns[tk{t.key.Group, ti}]
			if a == nil {
				a = &TxnResult{Group: t.key.Group, Txn: ti, Start: s.Start}
				txns[tk{t.key.Group, ti}] = a
			}
			a.Hist.Merge(&s.Hist)
			a.Bytes += s.Bytes
			a.Start = min(a.Start, s.Start)
			a.End = max(a.End, s.End)
			for oi := range t.g.Txns[ti].Ops {
				os := &t.ops[ti][oi]
				o := ops[ok{t.key.Group, ti, oi}]
				if o == nil {
					o = &OpResult{Group: t.key.Group, Txn: ti, Op: oi}
					ops[ok{t.key.Group, ti, oi}] = o
				}
				o.Hist.Merge(&os.Hist)
				o.Bytes += os.Bytes
				o.Lost += os.Lost
			}
		}
		for _, c := range t.conns {
			if len(res.Conns) < MaxConnRecords {
				res.Conns = append(res.Conns, c)
			} else {
				res.ConnsLeft++
			}
		}
	}
	for gi := range p.Groups {
		for ti := range p.Groups[gi].Txns {
			if a := txns[tk{gi, ti}]; a != nil {
				res.Txns = append(res.Txns, *a)
			}
			for oi := range p.Groups[gi].Txns[ti].Ops {
				if o := ops[ok{gi, ti, oi}]; o != nil {
					res.Ops = append(res.Ops, *o)
				}
			}
		}
	}
	return res
}

// sample reads the threads' counters every cfg.Interval from T0 on.
func sample(cfg *ClientConfig, threads []*cthread, done <-chan struct{}) []result.Interval {
	const maxIntervals = 1 << 16
	var out []result.Interval
	var lastB, lastI uint64
	read := func(i int) {
		var b, it uint64
		for _, t := range threads {
			b += t.ctr.bytes.Load()
			it += t.ctr.iters.Load()
		}
		if len(out) < maxIntervals {
			out = append(out, result.Interval{Start: time.Duration(i) * cfg.Interval, Len: cfg.Interval, Bytes: b - lastB, Iters: it - lastI})
		}
		lastB, lastI = b, it
	}
	for i := 0; ; i++ {
		next := cfg.T0.Add(time.Duration(i+1) * cfg.Interval)
		select {
		case <-done:
			read(i)
			return out
		case <-time.After(time.Until(next)):
			read(i)
		}
	}
}

// opStat is one thread's totals of one flow operation.
type opStat struct {
	Hist  Hist
	Bytes uint64
	Lost  uint64
}

// cthread is one client thread.
type cthread struct {
	ctx  context.Context
	cfg  *ClientConfig
	key  Key
	g    *profile.Group
	info []txnInfo
	port int
	buf  []byte
	ops  [][]opStat
	txns []TxnResult
	ctr  counters

	conn               *sock
	connNet            profile.Network
	connTx, connRx     uint64 // payload bytes on the current connection
	connPkts           uint64 // UDP datagrams sent on it
	connRPkts          uint64 // UDP datagrams received on it
	connLost           uint64 // UDP datagrams it waited for in vain
	connLocal, connRem netip.AddrPort
	conns              []result.ConnStats
	err                error
}

func newCThread(ctx context.Context, cfg *ClientConfig, k Key, g *profile.Group, info []txnInfo) *cthread {
	t := &cthread{ctx: ctx, cfg: cfg, key: k, g: g, info: info, port: cfg.Plan.Port(k)}
	size := 1
	t.ops = make([][]opStat, len(g.Txns))
	t.txns = make([]TxnResult, len(g.Txns))
	for ti := range g.Txns {
		t.ops[ti] = make([]opStat, len(g.Txns[ti].Ops))
		for _, op := range g.Txns[ti].Ops {
			size = max(size, op.Size)
		}
	}
	t.buf = make([]byte, size)
	return t
}

// wait is the slice callback: only the run's end stops a client.
func (t *cthread) wait() error {
	if t.ctx.Err() != nil {
		return errAborted
	}
	return nil
}

// run executes the group's program.
func (t *cthread) run() {
	defer func() { _ = t.disconnect(nil) }() // the run's result is already recorded; a failed close changes nothing
	for ti := range t.g.Txns {
		if err := t.runTxn(ti); err != nil {
			t.err = fmt.Errorf("transaction %d: %w", ti, err)
			return
		}
	}
}

func (t *cthread) runTxn(ti int) error {
	txn := &t.g.Txns[ti]
	st := &t.txns[ti]
	st.Group, st.Txn = t.key.Group, ti
	st.Start = time.Now().UnixNano()
	defer func() { st.End = time.Now().UnixNano() }()
	var n uint64
	if txn.Duration > 0 {
		deadline := time.Now().Add(txn.Duration)
		for ; time.Now().Before(deadline); n++ {
			if err := t.iter(ti); err != nil {
				return err
			}
		}
	} else {
		for ; n < uint64(txn.Iterations); n++ {
			if err := t.iter(ti); err != nil {
				return err
			}
		}
	}
	if !t.info[ti].handshake {
		return nil
	}
	m, err := t.cfg.Stop.Stop(t.key, ti, n)
	if err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	for ; n < m; n++ {
		if err := t.iter(ti); err != nil {
			return err
		}
	}
	return nil
}

// iter runs one iteration of transaction ti.
func (t *cthread) iter(ti int) error {
	if t.ctx.Err() != nil {
		return errAborted
	}
	start := time.Now()
	var moved uint64
	for oi := range t.g.Txns[ti].Ops {
		b, err := t.op(&t.g.Txns[ti].Ops[oi], &t.ops[ti][oi])
		moved += b
		if err != nil {
			return fmt.Errorf("flowop %d (%s): %w", oi, t.g.Txns[ti].Ops[oi].Kind, err)
		}
	}
	st := &t.txns[ti]
	st.Hist.Record(time.Since(start))
	st.Bytes += moved
	t.ctr.iters.Add(1)
	return nil
}

// op runs one flow operation Count times; it returns the payload bytes moved.
func (t *cthread) op(op *profile.Op, st *opStat) (uint64, error) {
	switch op.Kind {
	case profile.Connect:
		start := time.Now()
		if t.conn != nil {
			return 0, errors.New("already connected")
		}
		remote := netip.AddrPortFrom(t.cfg.Server[op.Net].Pick(op.IPv6), uint16(t.port))
		c, err := dial(op, t.cfg.Local[op.Net].Pick(op.IPv6), remote, t.wait)
		if err != nil {
			return 0, err
		}
		t.conn, t.connNet = c, op.Net
		t.connTx, t.connRx, t.connPkts, t.connRPkts, t.connLost = 0, 0, 0, 0, 0
		t.connLocal, t.connRem = c.local(), remote
		st.Hist.Record(time.Since(start))
		return 0, nil
	case profile.Disconnect:
		start := time.Now()
		if err := t.disconnect(st); err != nil {
			return 0, err
		}
		st.Hist.Record(time.Since(start))
		return 0, nil
	case profile.Think:
		start := time.Now()
		if op.Idle {
			time.Sleep(op.Duration)
		} else {
			for time.Since(start) < op.Duration {
			}
		}
		st.Hist.Record(time.Since(start))
		return 0, nil
	}
	if t.conn == nil {
		return 0, errors.New("not connected")
	}
	buf := t.buf[:op.Size]
	var moved uint64
	for range op.Count {
		start := time.Now()
		var err error
		lost := false
		if t.conn.proto == profile.TCP {
			if op.Kind.Sends() {
				_, err = t.conn.writeAll(buf, t.wait)
			} else {
				_, err = t.conn.readFull(buf, t.wait, nil)
			}
		} else if op.Kind.Sends() {
			err = t.conn.send(buf, netip.AddrPort{}, t.wait)
			t.connPkts++
		} else {
			var n int
			n, _, err = t.conn.recv(buf, cmpTimeout(op.Timeout), t.wait)
			if err == errLost {
				lost, err = true, nil
			} else if err == nil && n != op.Size {
				err = fmt.Errorf("datagram of %d bytes, want %d", n, op.Size)
			}
			if err == nil && !lost {
				t.connRPkts++
			}
		}
		if err != nil {
			return moved, err
		}
		if lost {
			st.Lost++
			t.connLost++
			continue
		}
		st.Hist.Record(time.Since(start))
		moved += uint64(op.Size)
		st.Bytes += uint64(op.Size)
		t.ctr.bytes.Add(uint64(op.Size))
		if op.Kind.Sends() {
			t.connTx += uint64(op.Size)
		} else {
			t.connRx += uint64(op.Size)
		}
	}
	return moved, nil
}

func cmpTimeout(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return profile.DefaultUDPTimeout
}

// disconnect ends the connection, if any. TCP: send FIN, read the
// server's FIN, and read the kernel's final counters once the socket is
// closed (both FINs and the last ACK are then counted).
func (t *cthread) disconnect(st *opStat) error {
	c := t.conn
	if c == nil {
		if st != nil {
			return errors.New("not connected")
		}
		return nil
	}
	t.conn = nil
	defer c.close()
	cs := result.ConnStats{
		Pair: t.key.Pair, Group: t.key.Group, Thread: t.key.Thread, Proto: c.proto.String(),
		Client: t.connLocal.String(), Server: t.connRem.String(), Net: t.connNet.String(),
		FwdData: t.connTx, RevData: t.connRx,
	}
	ip := uint64(20)
	if c.v6 {
		ip = 40
	}
	if c.proto == profile.UDP {
		cs.FwdPkts, cs.RevPkts = t.connPkts, t.connRPkts
		cs.FwdIPBytes, cs.RevIPBytes = t.connTx+t.connPkts*(ip+8), t.connRx+t.connRPkts*(ip+8)
		cs.Exact = !fragments(t.g, c.v6) && t.connLost == 0
		t.conns = append(t.conns, cs)
		return nil
	}
	if err := c.shutdownWrite(); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	var one [1]byte
	if n, err := c.readFull(one[:], t.wait, nil); err != errEOF {
		if err == nil {
			err = fmt.Errorf("%d unexpected bytes from the server", n)
		}
		return fmt.Errorf("waiting for the server's close: %w", err)
	}
	var ti *tcpCounters
	for i := 0; i < 200; i++ { // the socket is closed once the last ACK is sent
		var err error
		if ti, err = c.tcpInfo(); err != nil {
			return fmt.Errorf("TCP_INFO: %w", err)
		}
		if ti.State == tcpClose {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cs.FwdPkts, cs.RevPkts = uint64(ti.SegsOut), uint64(ti.SegsIn)
	cs.Retransmits = uint64(ti.TotalRetrans)
	// Linux TCP headers with timestamps: 32 bytes, and 40 on the SYN and
	// the SYN-ACK (MSS, SACK-permitted and window scale besides).
	cs.FwdIPBytes = t.connTx + cs.FwdPkts*(ip+32) + 8
	cs.RevIPBytes = t.connRx + cs.RevPkts*(ip+32) + 8
	cs.Exact = ti.State == tcpClose && ti.TotalRetrans == 0 && ti.Options&tcpiOptTimestamps != 0 && ti.Options&tcpiOptSACK != 0 && ti.Options&tcpiOptWscale != 0
	t.conns = append(t.conns, cs)
	return nil
}

// Kernel constants (include/net/tcp_states.h, include/uapi/linux/tcp.h).
const (
	tcpClose          = 7
	tcpiOptTimestamps = 1
	tcpiOptSACK       = 2
	tcpiOptWscale     = 4
)

// mtu is the test interfaces' MTU.
const mtu = 1500

// fragments reports whether a UDP connection's datagrams may be larger than
// one packet (then packets are not datagrams).
func fragments(g *profile.Group, v6 bool) bool {
	ip := 20
	if v6 {
		ip = 40
	}
	for _, tx := range g.Txns {
		for _, op := range tx.Ops {
			if op.Size+8+ip > mtu {
				return true
			}
		}
	}
	return false
}
