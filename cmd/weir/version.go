package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "weir version", "Print weir's version, commit and Go toolchain.", "")
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	commit := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				commit = s.Value
			}
		}
	}
	fmt.Fprintf(stdout, "weir %s (commit %s, %s, %s/%s)\n", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return exitOK
}
