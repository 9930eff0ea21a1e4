package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// Exit statuses of every command.
const (
	ExitOK      = 0 // success
	ExitFailure = 1 // the command ran and failed (damaged input, sink error)
	ExitUsage   = 2 // the command line is wrong
)

// ParseArgs parses args into fs (Parse) and turns its errors into exit
// statuses: -h/--help prints help on stdout and is done with ExitOK,
// anything else wrong is said on stderr, done with ExitUsage.
func ParseArgs(fs *flag.FlagSet, args []string, interleaved bool, stdout, stderr io.Writer) (pos []string, done bool, code int) {
	pos, err := Parse(fs, args, interleaved)
	switch {
	case err == nil:
		return pos, false, ExitOK
	case errors.Is(err, ErrDescribed):
		return nil, true, ExitOK
	case errors.Is(err, flag.ErrHelp):
		WriteHelp(stdout, fs)
		return nil, true, ExitOK
	}
	fmt.Fprintf(stderr, "weir %s: %v\nRun 'weir %s --help' for usage.\n", fs.Name(), err, fs.Name())
	return nil, true, ExitUsage
}

// WriteConfigExamples is 'weir config example [COMMAND]': the commented
// config file of the command named by pos, or of every command not
// hidden, separated by YAML's "---".
func WriteConfigExamples(w io.Writer, cmds []Command, pos []string) error {
	if len(pos) > 0 {
		c, rest, ok := Find(cmds, pos)
		if !ok || len(rest) > 0 || c.Hidden {
			return fmt.Errorf("no command %q", strings.Join(pos, " "))
		}
		cmds = []Command{c}
	}
	sep := ""
	for _, c := range cmds {
		if c.Hidden {
			continue
		}
		fmt.Fprint(w, sep)
		_ = WriteExample(w, c.FlagSet()) // to stdout: nowhere else to report
		sep = "---\n"
	}
	return nil
}

// WriteGroup answers 'weir GROUP [help|NAME]' when GROUP is only the first
// word of commands (bench): their list, on stdout when asked for help,
// else on stderr after saying what is unknown. It returns the exit
// status.
func WriteGroup(stdout, stderr io.Writer, group []Command, args []string) int {
	help := len(args) > 1 && (args[1] == "--help" || args[1] == "-h" || args[1] == "help")
	w, code := stderr, ExitUsage
	if help {
		w, code = stdout, ExitOK
	} else if len(args) > 1 {
		fmt.Fprintf(stderr, "weir %s: unknown command %q\n", args[0], args[1])
	}
	named := make([]Command, len(group))
	for i, c := range group {
		c.Name = "weir " + c.Name
		named[i] = c
	}
	fmt.Fprintf(w, "Usage:\n")
	WriteIndex(w, named)
	fmt.Fprintf(w, "\nRun 'weir %s COMMAND --help' for a command's flags.\n", args[0])
	return code
}

// VersionLine is what 'weir version' prints: the version, the commit it
// was built from (when the build recorded it), Go and the platform.
func VersionLine(version string) string {
	commit := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				commit = s.Value
			}
		}
	}
	return fmt.Sprintf("weir %s (commit %s, %s, %s/%s)", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// Logf returns a printf to w whose lines read "weir CMD: ...".
func Logf(w io.Writer, cmd string) func(format string, a ...any) {
	return func(format string, a ...any) {
		fmt.Fprintf(w, "weir "+cmd+": "+format+"\n", a...)
	}
}
