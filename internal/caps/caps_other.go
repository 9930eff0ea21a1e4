//go:build !linux

package caps

// Current returns ErrUnsupported outside Linux.
func Current() (State, error) { return State{}, ErrUnsupported }

// Drop changes nothing outside Linux.
func Drop(keep Set) (Result, error) { return Result{}, ErrUnsupported }
