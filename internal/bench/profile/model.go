// Package profile is weir bench's traffic profile: thread groups running
// transactions of flow operations, in the shape of uperf's profiles. It
// reads weir's YAML form and uperf's XML form (as uperf and the Ripsaw
// operator write it) into one model, and validates it: a Profile that
// Validate accepts can be run by the engine without further checks.
//
// The model is the client's view. The server mirrors it: a client write is
// a server read of the same bytes, a client connect a server accept, and so
// on (see internal/bench/engine).
package profile

import "time"

// Proto is a connection's transport.
type Proto uint8

// Transports.
const (
	TCP Proto = iota + 1
	UDP
)

// String returns "tcp" or "udp".
func (p Proto) String() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	}
	return "proto?"
}

// OpKind is what a flow operation does.
type OpKind uint8

// Flow operations. Write and Read move Size bytes Count times over the
// thread's connection (TCP: a byte stream, each Read waits for exactly Size
// bytes; UDP: one datagram each); SendTo and RecvFrom are the datagram
// forms (UDP only). Think waits Duration without traffic.
const (
	Connect OpKind = iota + 1
	Write
	Read
	SendTo
	RecvFrom
	Disconnect
	Think
)

// String returns the uperf name of the operation ("connect", "write", ...).
func (k OpKind) String() string {
	switch k {
	case Connect:
		return "connect"
	case Write:
		return "write"
	case Read:
		return "read"
	case SendTo:
		return "sendto"
	case RecvFrom:
		return "recvfrom"
	case Disconnect:
		return "disconnect"
	case Think:
		return "think"
	}
	return "op?"
}

// Sends reports whether the client sends data in this operation (write,
// sendto); the server then receives.
func (k OpKind) Sends() bool { return k == Write || k == SendTo }

// Receives reports whether the client receives data in this operation
// (read, recvfrom); the server then sends.
func (k OpKind) Receives() bool { return k == Read || k == RecvFrom }

// Network names which of a host's networks a connection uses.
type Network uint8

// Networks. Secondary is the extra interface (the Multus case); a profile
// that uses it makes weir bench build the second network.
const (
	Primary Network = iota
	Secondary
)

// String returns "primary" or "secondary".
func (n Network) String() string {
	if n == Secondary {
		return "secondary"
	}
	return "primary"
}

// Profile is one benchmark: groups of threads that run at the same time.
type Profile struct {
	Name   string  `json:"name"`
	Groups []Group `json:"groups"`
}

// Group is Threads client threads running the same transactions in order.
// Each thread has its own connection and its own server thread.
type Group struct {
	Name    string `json:"name,omitempty"`
	Threads int    `json:"nthreads"`
	Txns    []Txn  `json:"transactions"`
}

// Txn is a list of flow operations run Iterations times, or again and again
// for Duration (exactly one of the two is set).
type Txn struct {
	Name       string        `json:"name,omitempty"`
	Iterations int           `json:"iterations,omitempty"`
	Duration   time.Duration `json:"duration,omitempty"`
	Ops        []Op          `json:"flowops"`
}

// Op is one flow operation. Which fields matter depends on Kind.
type Op struct {
	Kind OpKind `json:"kind"`

	// Connect.
	Proto   Proto   `json:"proto,omitempty"`
	IPv6    bool    `json:"ipv6,omitempty"`
	Net     Network `json:"net,omitempty"`
	NoDelay bool    `json:"nodelay,omitempty"` // TCP_NODELAY
	WndSz   int     `json:"wndsz,omitempty"`   // SO_SNDBUF and SO_RCVBUF, bytes (0: the kernel's)

	// Write, Read, SendTo, RecvFrom.
	Size  int `json:"size,omitempty"`  // bytes per call (per datagram for UDP)
	Count int `json:"count,omitempty"` // calls per execution of the op (≥ 1)

	// Think: how long; Idle sleeps, otherwise the thread spins (uperf's
	// default, for sub-millisecond think times).
	Duration time.Duration `json:"duration,omitempty"`
	Idle     bool          `json:"idle,omitempty"`

	// Receives (Read, RecvFrom) on UDP: give up on a datagram after Timeout
	// and count it lost (0: DefaultUDPTimeout).
	Timeout time.Duration `json:"timeout,omitempty"`
}

// Limits Validate enforces.
const (
	MaxThreads    = 1024          // client threads over all groups
	MaxIterations = 1_000_000_000 // per transaction
	MaxDuration   = time.Hour     // per transaction
	MaxCount      = 1_000_000     // per op
	MaxSize       = 16 << 20      // bytes per TCP call
	MaxUDPSize    = 65507         // bytes per datagram (IPv4's limit, also used for IPv6)
	MaxThink      = 10 * time.Second
	MaxUDPTimeout = 10 * time.Second
	MaxOpsPerTxn  = 64
	MaxTxnsPerGrp = 64
	MaxGroups     = 64

	// DefaultUDPTimeout bounds a UDP receive when the op sets none.
	DefaultUDPTimeout = time.Second
)
