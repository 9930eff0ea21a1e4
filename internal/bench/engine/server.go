package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/weir-dev/weir/internal/bench/profile"
)

// ServerResult is what the server threads saw.
type ServerResult struct {
	Conns  uint64 `json:"conns"` // connections accepted
	RxData uint64 `json:"rx_payload"`
	TxData uint64 `json:"tx_payload"`
	Lost   uint64 `json:"lost"`  // UDP receives that timed out, and transactions that ended with datagrams missing
	Stray  uint64 `json:"stray"` // datagrams from another address than the thread's client
	// Retrans are the TCP connections on which the server retransmitted
	// (at most MaxConnRecords): the client's kernel counts the copies it
	// received, but they make the connection's bytes inexact.
	Retrans []ServerRetrans `json:"retrans,omitempty"`
	Errors  []string        `json:"errors,omitempty"`
}

// ServerRetrans is one connection the server retransmitted on.
type ServerRetrans struct {
	Client   string `json:"client"` // the client's addr:port
	Segments uint64 `json:"segments"`
	Bytes    uint64 `json:"bytes"`
}

// Server is the server side of every pair: one thread per client thread,
// each with its own port on every address of the host.
type Server struct {
	plan    Plan
	threads []*sthread
	wg      sync.WaitGroup
	byKey   map[Key]*sthread
}

// errTxnDone ends a transaction on the server when the client has said
// where it ends.
var errTxnDone = errors.New("transaction done")

// NewServer binds every server thread's sockets (a TCP listener and/or a
// UDP socket, as the thread's program needs, dual-stack on all addresses).
func NewServer(plan Plan) (*Server, error) {
	if err := plan.Check(); err != nil {
		return nil, err
	}
	s := &Server{plan: plan, byKey: map[Key]*sthread{}}
	p := plan.Profile
	for pair := range plan.Pairs {
		for gi := range p.Groups {
			g := &p.Groups[gi]
			info := analyse(g)
			var tcp, udp bool
			for _, tx := range g.Txns {
				for _, op := range tx.Ops {
					if op.Kind == profile.Connect {
						tcp = tcp || op.Proto == profile.TCP
						udp = udp || op.Proto == profile.UDP
					}
				}
			}
			for ti := range g.Threads {
				k := Key{pair, gi, ti}
				t := &sthread{key: k, g: g, info: info}
				t.stopAt = make([]int64, len(g.Txns))
				t.txnDone = make([]chan struct{}, len(g.Txns))
				for i := range t.txnDone {
					t.txnDone[i] = make(chan struct{})
				}
				t.started = make([]uint64, len(g.Txns))
				for i := range t.stopAt {
					t.stopAt[i] = -1
				}
				size := 1
				for _, tx := range g.Txns {
					for _, op := range tx.Ops {
						size = max(size, op.Size)
					}
				}
				t.buf = make([]byte, size)
				var err error
				if tcp {
					if t.ln, err = listen(profile.TCP, plan.Port(k)); err != nil {
						s.Close()
						return nil, err
					}
				}
				if udp {
					if t.udp, err = listen(profile.UDP, plan.Port(k)); err != nil {
						t.ln.close()
						s.Close()
						return nil, err
					}
				}
				s.threads = append(s.threads, t)
				s.byKey[k] = t
			}
		}
	}
	return s, nil
}

// Start runs the server threads until their programs end or ctx is done.
func (s *Server) Start(ctx context.Context) {
	for _, t := range s.threads {
		t.ctx = ctx
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t.run()
		}()
	}
}

// StopAt answers a client thread's Stopper call: the client ran n
// iterations of transaction txn; it must run max(n, iterations its server
// thread already began).
func (s *Server) StopAt(k Key, txn int, n uint64) (uint64, error) {
	t := s.byKey[k]
	if t == nil || txn < 0 || txn >= len(t.stopAt) {
		return 0, fmt.Errorf("engine: stop for unknown thread %+v transaction %d", k, txn)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopAt[txn] >= 0 {
		return 0, fmt.Errorf("engine: second stop for thread %+v transaction %d", k, txn)
	}
	m := max(n, t.started[txn])
	t.stopAt[txn] = int64(m)
	if !t.info[txn].udpRecv {
		return m, nil
	}
	// Datagrams carry no transaction number: the client may only go on
	// once its server thread has drained this transaction, or the next
	// transaction's datagrams would be taken for late ones of this.
	t.mu.Unlock()
	defer t.mu.Lock()
	ctx := t.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	select {
	case <-t.txnDone[txn]:
	case <-ctx.Done():
		return 0, errAborted
	}
	return m, nil
}

// Wait waits for every server thread and returns the totals.
func (s *Server) Wait() *ServerResult {
	s.wg.Wait()
	r := &ServerResult{}
	for _, t := range s.threads {
		r.Conns += t.accepted
		r.RxData += t.rx
		r.TxData += t.tx
		r.Lost += t.lost
		r.Stray += t.stray
		for _, x := range t.retrans {
			if len(r.Retrans) < MaxConnRecords {
				r.Retrans = append(r.Retrans, x)
			}
		}
		if t.err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("server pair %d group %d thread %d: %v", t.key.Pair, t.key.Group, t.key.Thread, t.err))
		}
	}
	return r
}

// Close closes every socket (threads still running then fail).
func (s *Server) Close() {
	for _, t := range s.threads {
		t.ln.close()
		t.udp.close()
	}
}

// sthread mirrors one client thread.
type sthread struct {
	ctx  context.Context
	key  Key
	g    *profile.Group
	info []txnInfo
	ln   *sock // TCP listener
	udp  *sock // UDP socket (unconnected: peer is the client)
	buf  []byte

	conn     *sock          // accepted TCP connection
	pendConn *sock          // accepted too early: the next transaction's (errPastEnd)
	proto    profile.Proto  // transport in effect
	peer     netip.AddrPort // the UDP client, learnt from its first datagram

	mu      sync.Mutex
	stopAt  []int64         // per transaction: iterations agreed (-1: not yet)
	txnDone []chan struct{} // per transaction: closed when the thread has finished it
	started []uint64        // per transaction: iterations begun

	accepted, rx, tx, lost, stray uint64
	retrans                       []ServerRetrans
	err                           error
}

func (t *sthread) run() {
	defer func() {
		t.conn.close()
		t.pendConn.close()
	}()
	next := 0
	defer func() { // release every client still waiting on a stop
		for ; next < len(t.txnDone); next++ {
			close(t.txnDone[next])
		}
	}()
	for ti := range t.g.Txns {
		err := t.runTxn(ti)
		close(t.txnDone[ti])
		next = ti + 1
		if err != nil {
			t.err = fmt.Errorf("transaction %d: %w", ti, err)
			return
		}
	}
	if t.conn != nil { // the client disconnects implicitly at the end
		if err := t.awaitClose(func() error { return t.abort() }); err != nil {
			t.err = fmt.Errorf("final close: %w", err)
		}
	}
}

func (t *sthread) abort() error {
	if t.ctx.Err() != nil {
		return errAborted
	}
	return nil
}

func (t *sthread) runTxn(ti int) error {
	txn := &t.g.Txns[ti]
	info := t.info[ti]
	if !info.handshake {
		for i := range txn.Iterations {
			if err := t.iterWith(ti, uint64(i), t.abort, nil); err != nil {
				return err
			}
		}
		return nil
	}
	for i := uint64(0); ; i++ {
		t.mu.Lock()
		stop := t.stopAt[ti]
		if stop >= 0 && i >= uint64(stop) {
			t.mu.Unlock()
			return nil
		}
		if info.serverFirst {
			t.started[ti] = i + 1
		}
		t.mu.Unlock()
		// The wait callback ends the transaction once the client has said
		// where it ends and nothing more can come: for TCP only when this
		// iteration is past the end, for UDP whenever a receive times out
		// (the rest was lost).
		wait := func() error {
			if err := t.abort(); err != nil {
				return err
			}
			t.mu.Lock()
			stop := t.stopAt[ti]
			t.mu.Unlock()
			if stop >= 0 && (t.proto == profile.UDP || i >= uint64(stop)) {
				return errTxnDone
			}
			return nil
		}
		first := func() error {
			if info.serverFirst {
				return nil
			}
			t.mu.Lock()
			defer t.mu.Unlock()
			if stop := t.stopAt[ti]; stop >= 0 && i >= uint64(stop) {
				return errPastEnd // the client is in its next transaction
			}
			t.started[ti] = i + 1
			return nil
		}
		err := t.iterWith(ti, i, wait, first)
		if err == nil {
			continue
		}
		t.mu.Lock()
		stop = t.stopAt[ti]
		t.mu.Unlock()
		if stop >= 0 && i >= uint64(stop) {
			// Past the agreed end: the client moved on (its FIN, or its
			// next transaction's first datagram, may be what came).
			return nil
		}
		if err == errPastEnd {
			return fmt.Errorf("client went past the agreed end (iteration %d of %d)", i+1, stop)
		}
		if err == errTxnDone { // UDP: the rest of the agreed iterations was lost
			t.lost++
			return nil
		}
		return err
	}
}

// iterWith mirrors one iteration; first is called when the client's first
// data (or connection, or close) of the iteration arrives.
func (t *sthread) iterWith(ti int, i uint64, wait waitFn, first func() error) error {
	for oi := range t.g.Txns[ti].Ops {
		op := &t.g.Txns[ti].Ops[oi]
		if op.Kind == profile.Think {
			continue
		}
		if err := t.mirror(op, wait, first); err != nil {
			if err == errTxnDone {
				return err
			}
			return fmt.Errorf("flowop %d (%s): %w", oi, op.Kind, err)
		}
		first = nil // only the first op can begin an iteration
	}
	return nil
}

// mirror does the server's half of one client op.
func (t *sthread) mirror(op *profile.Op, wait waitFn, first func() error) error {
	event := func() error {
		if first != nil {
			f := first
			first = nil
			return f()
		}
		return nil
	}
	switch op.Kind {
	case profile.Connect:
		t.proto = op.Proto
		if op.Proto == profile.UDP {
			t.peer = netip.AddrPort{}
			return event()
		}
		c := t.pendConn
		t.pendConn = nil
		if c == nil {
			var peer netip.AddrPort
			var err error
			if c, peer, err = t.ln.accept(op, wait); err != nil {
				return err
			}
			c.peer = peer
			t.accepted++
		}
		if err := event(); err != nil {
			if err == errPastEnd {
				t.pendConn = c // the next transaction's connection
			} else {
				c.close()
			}
			return err
		}
		t.conn = c
		return nil
	case profile.Disconnect:
		if t.proto == profile.UDP {
			t.proto = 0
			return event()
		}
		t.proto = 0
		return t.awaitClose(wait, event)
	}
	buf := t.buf[:op.Size]
	for range op.Count {
		if t.proto == profile.TCP {
			if op.Kind.Sends() { // the client sends: read
				if _, err := t.conn.readFull(buf, wait, event); err != nil {
					return err
				}
				t.rx += uint64(op.Size)
			} else {
				if err := event(); err != nil {
					return err
				}
				if _, err := t.conn.writeAll(buf, wait); err != nil {
					return err
				}
				t.tx += uint64(op.Size)
			}
			continue
		}
		if op.Kind.Sends() {
			if err := t.recvFromPeer(buf, op, wait, event); err != nil {
				return err
			}
			continue
		}
		if !t.peer.IsValid() {
			return errors.New("UDP: the client has not sent anything yet, so the server cannot answer")
		}
		if err := t.udp.send(buf, t.peer, wait); err != nil {
			return err
		}
		t.tx += uint64(op.Size)
	}
	return nil
}

// recvFromPeer receives one datagram from the thread's client (learning it
// from the first datagram after a connect); a timeout counts it lost.
func (t *sthread) recvFromPeer(buf []byte, op *profile.Op, wait waitFn, event func() error) error {
	for {
		n, from, err := t.udp.recv(buf, cmpTimeout(op.Timeout), wait)
		if err == errLost {
			t.lost++
			return nil
		}
		if err != nil {
			return err
		}
		if !t.peer.IsValid() {
			t.peer = from
		} else if from != t.peer {
			t.stray++
			continue
		}
		if n != op.Size {
			return fmt.Errorf("datagram of %d bytes, want %d", n, op.Size)
		}
		if err := event(); err != nil {
			if err == errPastEnd {
				t.udp.pushBack(buf[:n], from)
			}
			return err
		}
		t.rx += uint64(n)
		return nil
	}
}

// awaitClose waits for the client's FIN (any data first is an error) and
// closes the connection.
func (t *sthread) awaitClose(wait waitFn, event ...func() error) error {
	c := t.conn
	if c == nil {
		return errors.New("no connection to close")
	}
	var one [1]byte
	_, err := c.readFull(one[:], wait, nil)
	if err == errTxnDone {
		return err
	}
	t.conn = nil
	if ti, ierr := c.tcpInfo(); ierr == nil && ti.TotalRetrans > 0 {
		t.retrans = append(t.retrans, ServerRetrans{Client: c.peer.String(), Segments: uint64(ti.TotalRetrans), Bytes: ti.BytesRetrans})
	}
	c.close()
	if err != errEOF {
		if err == nil {
			err = errors.New("data after the client's last write")
		}
		return fmt.Errorf("waiting for the client's close: %w", err)
	}
	for _, e := range event {
		if err := e(); err != nil {
			return err
		}
	}
	return nil
}
