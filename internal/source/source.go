// Package source defines what every packet source hands the meter: one
// captured frame at a time, read into a caller-owned Frame so that sources
// can reuse their buffers and the hot path never allocates.
package source

import (
	"errors"

	"github.com/weir-dev/weir/internal/packet"
)

// Frame is one captured frame. Data is only valid until the next call to
// the source's Next: sources reuse their buffers.
type Frame struct {
	Data    []byte          // captured bytes (may be shorter than WireLen)
	WireLen int             // length of the frame on the wire
	Time    int64           // capture timestamp, Unix nanoseconds
	Link    packet.LinkType // link-layer header type of Data
	Iface   string          // interface name (interned by the source: no allocation per frame)
	// VLAN is the 802.1Q tag control information the capture stripped
	// from the frame (AF_PACKET's auxiliary data), when HasVLAN; a tag
	// still in Data is then an inner one.
	VLAN    uint16
	HasVLAN bool
}

// PacketSource yields captured frames.
type PacketSource interface {
	// Next fills f with the next frame. It returns io.EOF when the input
	// has ended, and ErrStopped after Stop.
	Next(f *Frame) error
}

// ErrStopped is returned by a source that was stopped before its input ended.
var ErrStopped = errors.New("source: stopped")
