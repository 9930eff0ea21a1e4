// Package engine is weir bench's traffic driver: client threads that run a
// profile's transactions of flow operations against server threads that
// mirror them (a client write is a server read of the same bytes, a client
// connect a server accept, a client read a server write), with exact byte
// counts and per-call latencies.
//
// Each client thread has its own server thread, found by port (Plan.Port),
// so the server needs no handshake on the data connections: the only bytes
// on the wire are the profile's. Where the two sides must agree on where a
// transaction ends (transactions run for a duration, and those in which the
// server receives UDP datagrams that may be lost) the client asks its server
// thread through a side channel (Stopper) that never touches the test
// network: in weir bench it is the parent process's pipes.
package engine

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/weir-dev/weir/internal/bench/profile"
)

// Key names one client thread and its server thread.
type Key struct {
	Pair   int `json:"pair"`
	Group  int `json:"group"`
	Thread int `json:"thread"`
}

// Addrs are one host's addresses on one network.
type Addrs struct {
	V4 netip.Addr `json:"v4"`
	V6 netip.Addr `json:"v6"`
}

// Pick returns the IPv6 address if v6 is set, else the IPv4 one.
func (a Addrs) Pick(v6 bool) netip.Addr {
	if v6 {
		return a.V6
	}
	return a.V4
}

// Plan is what both sides agree on before traffic starts.
type Plan struct {
	Profile  *profile.Profile `json:"profile"`
	Pairs    int              `json:"pairs"`
	BasePort int              `json:"base_port"`
}

// MaxPorts bounds Pairs × threads: one server port per client thread.
const MaxPorts = 16384

// Check validates the plan (the profile must already be valid).
func (p *Plan) Check() error {
	if p.Profile == nil {
		return errors.New("engine: plan without a profile")
	}
	if p.Pairs < 1 {
		return fmt.Errorf("engine: %d pairs", p.Pairs)
	}
	if n := p.Pairs * p.Profile.Threads(); n > MaxPorts {
		return fmt.Errorf("engine: %d pairs × %d threads = %d server threads, at most %d", p.Pairs, p.Profile.Threads(), n, MaxPorts)
	}
	if p.BasePort < 1024 || p.BasePort+p.Pairs*p.Profile.Threads() > 65535 {
		return fmt.Errorf("engine: base port %d does not leave room for %d ports", p.BasePort, p.Pairs*p.Profile.Threads())
	}
	return nil
}

// Port returns the server port of thread k.
func (p *Plan) Port(k Key) int {
	off := 0
	for g := range k.Group {
		off += p.Profile.Groups[g].Threads
	}
	return p.BasePort + k.Pair*p.Profile.Threads() + off + k.Thread
}

// Stopper is the side channel of duration transactions: the client thread
// k reports that it ran n iterations of transaction txn and learns how many
// it must run in all (n or more, when its server thread already began more).
type Stopper interface {
	Stop(k Key, txn int, n uint64) (uint64, error)
}

// txnInfo is what both sides derive from the profile for one transaction.
type txnInfo struct {
	proto       profile.Proto // transport in effect at the start (0: none)
	serverFirst bool          // the server starts an iteration (the client first receives)
	handshake   bool          // the sides agree on the end through the Stopper
	udpRecv     bool          // the server receives UDP datagrams in it
}

// analyse walks a group's transactions as the program runs them.
func analyse(g *profile.Group) []txnInfo {
	out := make([]txnInfo, len(g.Txns))
	var cur profile.Proto
	for i := range g.Txns {
		t := &g.Txns[i]
		out[i].proto = cur
		first := true
		for _, op := range t.Ops {
			switch op.Kind {
			case profile.Think:
				continue
			case profile.Connect:
				cur = op.Proto
			case profile.Disconnect:
				cur = 0
			}
			if first {
				out[i].serverFirst = op.Kind.Receives()
				first = false
			}
			if op.Kind.Sends() && cur == profile.UDP {
				out[i].udpRecv = true
			}
		}
		out[i].handshake = t.Duration > 0 || out[i].udpRecv
	}
	return out
}
