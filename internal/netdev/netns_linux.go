//go:build linux

package netdev

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// InNetns runs fn on an OS thread switched into the network namespace
// whose file is path, and switches the thread back afterwards (a thread
// that cannot switch back is not reused).
func InNetns(path string, fn func() error) error {
	target, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("netdev: network namespace: %w", err)
	}
	defer target.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("netdev: current network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("netdev: entering %s: %w", path, err)
			return
		}
		ok := false
		defer func() {
			if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			} // else: stay locked, the thread dies with this goroutine
			if !ok {
				done <- errors.New("netdev: fn did not return (panic or Goexit) in " + path)
			}
		}()
		err = fn()
		ok = true
		done <- err
	}()
	return <-done
}
