//go:build !linux

package netdev

import "fmt"

// List returns ErrUnsupported: rtnetlink exists only on Linux.
func List() ([]Link, error) { return nil, ErrUnsupported }

// Watcher reports link changes; on this system Watch always fails.
type Watcher struct{ c counters }

// Watch returns ErrUnsupported: rtnetlink exists only on Linux.
func Watch() (*Watcher, error) { return nil, ErrUnsupported }

// Initial returns nil.
func (w *Watcher) Initial() []Link { return nil }

// List returns ErrUnsupported.
func (w *Watcher) List() ([]Link, error) { return nil, ErrUnsupported }

// Next returns ErrClosed.
func (w *Watcher) Next() (Event, error) { return Event{}, ErrClosed }

// Stats returns zero counters.
func (w *Watcher) Stats() Stats { return w.c.snapshot() }

// Close does nothing.
func (w *Watcher) Close() error { return nil }

// InNetns returns ErrUnsupported: network namespaces exist only on Linux.
func InNetns(path string, fn func() error) error {
	return fmt.Errorf("%w: network namespace %s needs Linux", ErrUnsupported, path)
}
