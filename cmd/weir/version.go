package main

import (
	"fmt"
	"io"

	"github.com/weir-dev/weir/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "weir version", "Print weir's version, commit and Go toolchain.", "")
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	fmt.Fprintln(stdout, cli.VersionLine(version))
	return exitOK
}
