//go:build !linux

package testhost

import (
	"context"
	"testing"
)

// Available reports whether test hosts can be built here: never on this
// system, which has no network namespaces.
func Available() (ok bool, why string) {
	return false, ErrUnsupported.Error()
}

// NewPair skips or fails the test as Skip does: there are no network
// namespaces on this system.
func NewPair(t testing.TB) *Pair {
	t.Helper()
	Skip(t)
	return nil
}

// Do returns ErrUnsupported: there are no network namespaces on this system.
func (h *Host) Do(fn func() error) error { return ErrUnsupported }

// Exec returns ErrUnsupported: there are no network namespaces on this system.
func (h *Host) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	return nil, ErrUnsupported
}

// NewNet skips or fails the test as Skip does: there are no network
// namespaces on this system.
func NewNet(t testing.TB, kind HubKind, hosts int) *Net {
	t.Helper()
	Skip(t)
	return nil
}

// AddHost returns ErrUnsupported: there are no network namespaces on this system.
func (n *Net) AddHost(ctx context.Context) (*Host, error) { return nil, ErrUnsupported }
