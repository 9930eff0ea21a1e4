//go:build !linux

package ebpf

import (
	"context"
	"errors"
	"runtime"

	"github.com/weir-dev/weir/internal/sink"
)

// ErrUnsupported: eBPF needs Linux.
var ErrUnsupported = errors.New("ebpf: the eBPF source needs Linux; this is " + runtime.GOOS)

// Source is the eBPF source; on this system New always fails.
type Source struct{}

// New returns ErrUnsupported.
func New(cfg Config) (*Source, error) { return nil, ErrUnsupported }

// Run returns ErrUnsupported.
func (s *Source) Run(ctx context.Context, out sink.Sink) error { return ErrUnsupported }

// Stats returns zero counters.
func (s *Source) Stats() Stats { return Stats{} }

// Close does nothing.
func (s *Source) Close() error { return nil }
