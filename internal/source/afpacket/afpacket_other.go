//go:build !linux

package afpacket

import (
	"time"

	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
)

// Source is unavailable on this system; Open always fails.
type Source struct{}

// Open returns ErrUnsupported (after validating cfg).
func Open(cfg RingConfig) (*Source, error) {
	if _, err := cfg.normalize(4096); err != nil {
		return nil, err
	}
	return nil, ErrUnsupported
}

// Next returns ErrUnsupported.
func (s *Source) Next(f *source.Frame) error { return ErrUnsupported }

// NextTimeout returns ErrUnsupported.
func (s *Source) NextTimeout(f *source.Frame, d time.Duration) error { return ErrUnsupported }

// Link returns 0.
func (s *Source) Link() packet.LinkType { return 0 }

// Stats returns ErrUnsupported.
func (s *Source) Stats() (RingStats, error) { return RingStats{}, ErrUnsupported }

// FanoutGroup reports no group.
func (s *Source) FanoutGroup() (uint16, bool) { return 0, false }

// Close does nothing.
func (s *Source) Close() error { return nil }
