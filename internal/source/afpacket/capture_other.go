//go:build !linux

package afpacket

import (
	"context"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/sink"
)

// Capture is unavailable on this system.
type Capture struct{}

// New returns ErrUnsupported.
func New(cfg Config) (*Capture, error) { return nil, ErrUnsupported }

// Run returns ErrUnsupported.
func (c *Capture) Run(ctx context.Context, out sink.Sink) error { return ErrUnsupported }

// Close does nothing.
func (c *Capture) Close() error { return nil }

// Stats returns nothing.
func (c *Capture) Stats() Stats { return Stats{} }

// Top returns ErrUnsupported.
func (c *Capture) Top(ctx context.Context, n int) ([]flow.Record, error) { return nil, ErrUnsupported }
