//go:build !linux

package nflog

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/weir-dev/weir/internal/sink"
)

// ErrUnsupported is returned by Open on systems without netfilter.
var ErrUnsupported = errors.New("nflog: the NFLOG source needs Linux; this is " + runtime.GOOS)

// ErrOverrun mirrors the Linux error (never returned here).
var ErrOverrun = errors.New("nflog: netlink receive buffer overrun")

// ErrTimeout mirrors the Linux error (never returned here).
var ErrTimeout = errors.New("nflog: no message within the read timeout")

// Config mirrors the Linux configuration.
type Config struct {
	Netns        func(fn func() error) error
	Group        uint16
	CopyRange    uint32
	QThresh      uint32
	FlushTimeout time.Duration
	NLBufSize    uint32
	RcvBuf       int
	BufSize      int
	ReadTimeout  time.Duration
	BindPF       bool
}

// Stats mirrors the Linux counters.
type Stats struct {
	Datagrams, Messages, Control, ENOBUFS, EINTR uint64
}

// Socket is unavailable on this system.
type Socket struct{}

// Open returns ErrUnsupported.
func Open(Config) (*Socket, error) { return nil, ErrUnsupported }

// Close does nothing.
func (s *Socket) Close() error { return nil }

// Stats returns zero counters.
func (s *Socket) Stats() Stats { return Stats{} }

// Read returns ErrUnsupported.
func (s *Socket) Read(func(msg []byte) error) error { return ErrUnsupported }

// Source reads NFLOG groups; it cannot be opened on this system.
type Source struct{}

// New returns ErrUnsupported.
func New(cfg SourceConfig) (*Source, error) { return nil, ErrUnsupported }

// Run returns ErrUnsupported.
func (s *Source) Run(ctx context.Context, out sink.Sink) error { return ErrUnsupported }

// Close does nothing.
func (s *Source) Close() error { return nil }

// Stats returns nothing.
func (s *Source) Stats() []GroupStats { return nil }
