//go:build !linux

package engine

import (
	"fmt"
	"net/netip"
	"runtime"
	"time"

	"github.com/weir-dev/weir/internal/bench/profile"
)

// errNeedsLinux is every socket operation's error off Linux: the driver
// measures with Linux's TCP_INFO between test hosts in network namespaces.
var errNeedsLinux = fmt.Errorf("engine: weir bench's traffic driver needs Linux (this is %s)", runtime.GOOS)

func dial(*profile.Op, netip.Addr, netip.AddrPort, waitFn) (*sock, error) { return nil, errNeedsLinux }

func listen(profile.Proto, int) (*sock, error) { return nil, errNeedsLinux }

func (s *sock) close() {}

func (s *sock) local() netip.AddrPort { return netip.AddrPort{} }

func (s *sock) accept(*profile.Op, waitFn) (*sock, netip.AddrPort, error) {
	return nil, netip.AddrPort{}, errNeedsLinux
}

func (s *sock) readFull([]byte, waitFn, func() error) (int, error) { return 0, errNeedsLinux }

func (s *sock) writeAll([]byte, waitFn) (int, error) { return 0, errNeedsLinux }

func (s *sock) send([]byte, netip.AddrPort, waitFn) error { return errNeedsLinux }

func (s *sock) recv([]byte, time.Duration, waitFn) (int, netip.AddrPort, error) {
	return 0, netip.AddrPort{}, errNeedsLinux
}

func (s *sock) shutdownWrite() error { return errNeedsLinux }

func (s *sock) tcpInfo() (*tcpCounters, error) { return nil, errNeedsLinux }
