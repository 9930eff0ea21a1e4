//go:build !linux

package conntrack

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/weir-dev/weir/internal/sink"
)

// ErrUnsupported is returned by Open on systems without ctnetlink.
var ErrUnsupported = errors.New("conntrack: the conntrack source (ctnetlink) needs Linux; this is " + runtime.GOOS)

// ErrOverrun is returned when the socket's receive buffer overflowed (Linux only).
var ErrOverrun = errors.New("conntrack: netlink receive buffer overrun")

// DefaultBufSize is the receive buffer's default size.
const DefaultBufSize = 64 << 10

// MinBufSize is the smallest receive buffer Open accepts.
const MinBufSize = 8 << 10

// Config configures a Socket (see the Linux version).
type Config struct {
	Netns   func(fn func() error) error
	BufSize int
	Timeout time.Duration
}

// Stats are a Socket's counters (see the Linux version).
type Stats struct {
	Messages, Rejected, Foreign, Datagrams, ENOBUFS, EINTR uint64
}

// Socket is a ctnetlink socket; it cannot be opened on this system.
type Socket struct{}

// Open returns ErrUnsupported.
func Open(cfg Config) (*Socket, error) { return nil, ErrUnsupported }

func (s *Source) capacity() int { return 0 }

// Close does nothing.
func (s *Socket) Close() error { return nil }

// Stats returns zero counters.
func (s *Socket) Stats() Stats { return Stats{} }

// Errors returns zero counters.
func (s *Socket) Errors() [NumReasons]uint64 { return [NumReasons]uint64{} }

// Dump returns ErrUnsupported.
func (s *Socket) Dump(family uint8, fn func(c *Conn) error) error { return ErrUnsupported }

// DumpRaw returns ErrUnsupported.
func (s *Socket) DumpRaw(family uint8, fn func(msg []byte) error) error { return ErrUnsupported }

// Source reads conntrack tables; it cannot be opened on this system.
type Source struct{}

// New returns ErrUnsupported.
func New(cfg SourceConfig) (*Source, error) { return nil, ErrUnsupported }

// Run returns ErrUnsupported.
func (s *Source) Run(ctx context.Context, out sink.Sink) error { return ErrUnsupported }

// Close does nothing.
func (s *Source) Close() error { return nil }

// Stats returns zero counters.
func (s *Source) Stats() SourceStats { return SourceStats{} }

// Namespace returns the zero Netns.
func (s *Source) Namespace() Netns { return Netns{} }

// IdentifyNetns returns ErrUnsupported.
func IdentifyNetns(run func(fn func() error) error) (Netns, error) { return Netns{}, ErrUnsupported }
