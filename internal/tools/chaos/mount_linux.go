package main

import "syscall"

// mountTmpfs mounts a tmpfs of the given options (size=..., mode=...) on dir.
func mountTmpfs(dir, opts string) error { return syscall.Mount("tmpfs", dir, "tmpfs", 0, opts) }

// unmountLazy detaches the mount on dir (MNT_DETACH: even while busy).
func unmountLazy(dir string) error { return syscall.Unmount(dir, syscall.MNT_DETACH) }
