//go:build !linux

package ipfixrecv

import "net"

// inQueue is 0 off Linux: SIOCINQ is Linux's, so an evicted connection's
// partial message counts only the bytes weir had read.
func inQueue(net.Conn) int { return 0 }
