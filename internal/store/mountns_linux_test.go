package store

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// runInMountNS runs the tests matching run again in a child process with
// a mount namespace of its own (so a tmpfs it mounts vanishes with it),
// bounded to two minutes.
func runInMountNS(t *testing.T, run string, env ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+run, "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS} // Go makes / private in the child
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mountTmpfs mounts a tmpfs on dir (in the namespace runInMountNS made)
// and unmounts it when the test ends, before dir is removed.
func mountTmpfs(t *testing.T, dir, opts string) error {
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		return err
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return nil
}
