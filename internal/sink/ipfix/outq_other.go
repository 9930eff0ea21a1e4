//go:build !linux

package ipfix

import (
	"errors"
	"net"
)

// unacked cannot be known here: every message in flight counts as
// undelivered when a connection breaks.
func unacked(*net.TCPConn) (uint64, error) { return 0, errors.New("SIOCOUTQ: Linux only") }
