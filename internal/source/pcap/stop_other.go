//go:build !unix

package pcap

import (
	"io"
	"sync/atomic"
)

// stopper: without the Unix poller tricks, Stop takes effect at the next
// frame or end of input.
type stopper struct{ done atomic.Bool }

func nop() error { return nil }

func (s *stopper) watch(r io.Reader) (io.Reader, func() error) { return r, nop }
func (s *stopper) stop()                                       { s.done.Store(true) }
func (s *stopper) stopped() bool                               { return s.done.Load() }
