package engine

import (
	"errors"
	"net/netip"
	"time"

	"github.com/weir-dev/weir/internal/bench/profile"
)

// Sockets are blocking file descriptors used with plain read/write system
// calls: no netpoller wake-up between the kernel and the thread, the way
// uperf, iperf3 and sockperf run. Every blocking call is cut into slices of
// sliceTimeout (SO_RCVTIMEO, SO_SNDTIMEO), after which the caller's wait
// function says whether to go on, so nothing blocks for long: a run can
// always be stopped.
const sliceTimeout = 100 * time.Millisecond

// errEOF is a TCP peer's orderly close.
var errEOF = errors.New("connection closed by peer")

// waitFn is called each time a blocking call times out; a non-nil error
// ends the wait with that error.
type waitFn func() error

// sock is one socket.
type sock struct {
	fd    int
	proto profile.Proto
	v6    bool
	peer  netip.AddrPort // an accepted connection's client

	// Pushed back: bytes (TCP) or one datagram (UDP) read too early, which
	// the next read returns first (see errPastEnd).
	pend     []byte
	pendDgm  bool
	pendFrom netip.AddrPort
}

// errPastEnd is returned by a first callback when the data that arrived
// belongs to the next transaction; the reader pushes it back and returns
// errPastEnd.
var errPastEnd = errors.New("data of the next transaction")

// tcpCounters are the fields of the kernel's TCP_INFO the client reads.
type tcpCounters struct {
	State        uint8 // tcpClose once the last ACK is sent
	Options      uint8 // tcpiOpt* bits
	SegsOut      uint32
	SegsIn       uint32
	TotalRetrans uint32
	BytesRetrans uint64
}

// mapped returns a as a dual-stack socket needs it.
func mapped(a netip.Addr, v6 bool) netip.Addr {
	if v6 && a.Is4() {
		return netip.AddrFrom16(a.As16())
	}
	return a
}

// errLost is a datagram that did not come within the op's timeout.
var errLost = errors.New("datagram lost")

// pushBack makes the next recv return this datagram again.
func (s *sock) pushBack(dgm []byte, from netip.AddrPort) {
	s.pend = append(s.pend[:0], dgm...)
	s.pendDgm, s.pendFrom = true, from
}
