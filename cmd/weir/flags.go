package main

import (
	"embed"
	"flag"
	"io"
	"strings"

	"github.com/weir-dev/weir/internal/cli"
)

// newFlagSet returns a command's flag set with its help and --config.
var newFlagSet = cli.NewFlagSet

// helpFiles are the commands' help texts, help/NAME.txt (spaces in NAME
// as dashes): the usage line, a blank line, the description, then
// optionally "Examples:" and the examples. Help, man pages and the config
// example all show them.
//
//go:embed help/*.txt
var helpFiles embed.FS

// helpFlagSet is newFlagSet with the help text of help/NAME.txt.
func helpFlagSet(name string) *flag.FlagSet {
	b, err := helpFiles.ReadFile("help/" + strings.ReplaceAll(name, " ", "-") + ".txt")
	if err != nil {
		panic("weir: no help text for " + name) // a build without it is a bug TestHelpTexts finds
	}
	return cli.HelpFlagSet(name, string(b))
}

// parseFlags parses args (flags only) into fs, then the --config file, and
// turns errors into exit codes: -h/--help prints help and exits 0,
// anything else wrong is a usage error.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (done bool, code int) {
	_, done, code = cli.ParseArgs(fs, args, false, stdout, stderr)
	return done, code
}

// parseInterleaved parses flags that may come before, between or after
// positional arguments, which it returns.
func parseInterleaved(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (pos []string, done bool, code int) {
	return cli.ParseArgs(fs, args, true, stdout, stderr)
}
