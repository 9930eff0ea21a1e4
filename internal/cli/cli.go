// Package cli is weir's command-line machinery: the table of commands, flag
// sets that carry their own help, parsing with flags before, between or
// after arguments, and --config files whose keys are the long flag names.
//
// Every command builds its flag set with NewFlagSet and parses it with
// Parse. A command's flag set can be had without running it (FlagSet), so
// that help, the config example, man pages and shell completions all come
// from the flags the command really has.
package cli

import (
	"errors"
	"flag"
	"io"
	"strings"
	"sync"
)

// Command is one weir command.
type Command struct {
	// Name is the words after "weir": "capture", "bench gendb".
	Name string
	// Summary is one line for 'weir help'.
	Summary string
	// Hidden commands (re-executions of weir by itself) are not listed.
	Hidden bool
	// Run runs the command with the arguments after its name and returns
	// the exit status. It must build its flags with NewFlagSet and parse
	// them with Parse before anything else that has effects.
	Run func(args []string, stdout, stderr io.Writer) int
}

// Doc is what a command's help says besides its flags.
type Doc struct {
	Name        string // the command's name: "bench gendb"
	Usage       string // the usage line: "weir bench gendb --data-dir DIR [flags]"
	Description string // paragraphs
	Examples    string // indented example lines, without an "Examples:" heading
}

// ErrDescribed is returned by Parse when the command is only asked for its
// flag set (Command.FlagSet): the command must return at once.
var ErrDescribed = errors.New("cli: flag set described")

// describeArg is the argument that makes Parse record the flag set instead
// of parsing. It cannot be typed by accident.
const describeArg = "--\x00weir-describe"

var (
	describeMu sync.Mutex
	described  *flag.FlagSet
)

// FlagSet returns the command's flag set, with its Doc, by running it with
// an argument that makes Parse return ErrDescribed: nothing runs. It is nil
// for a command that does not parse flags with Parse.
func (c Command) FlagSet() *flag.FlagSet {
	describeMu.Lock()
	defer describeMu.Unlock()
	described = nil
	c.Run([]string{describeArg}, io.Discard, io.Discard)
	fs := described
	described = nil
	return fs
}

// configFlag is --config: the file's path, and the command's Doc (kept in
// the flag set this way so that a *flag.FlagSet is all callers pass).
type configFlag struct {
	path string
	doc  Doc
}

func (c *configFlag) String() string {
	if c == nil {
		return ""
	}
	return c.path
}

func (c *configFlag) Set(s string) error { c.path = s; return nil }

// ConfigFlag is the name of the flag every command has.
const ConfigFlag = "config"

// NewFlagSet returns a flag set for command name whose help (WriteHelp)
// shows usage, description, flags and examples, with --config already
// defined. examples may start with an "Examples:" line; it is dropped.
func NewFlagSet(name, usage, description, examples string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	examples = strings.TrimPrefix(examples, "Examples:\n")
	cf := &configFlag{doc: Doc{Name: name, Usage: usage, Description: description, Examples: examples}}
	fs.Var(cf, ConfigFlag, "read flags from this YAML `file`: its keys are the long flag names ('weir config example "+name+"' prints one); flags given on the command line win")
	fs.Usage = func() { WriteHelp(fs.Output(), fs) }
	return fs
}

// HelpFlagSet is NewFlagSet with the help in text: the usage line, a
// blank line, the description, then optionally "Examples:" and the
// examples (the form of cmd/weir/help/*.txt).
func HelpFlagSet(name, text string) *flag.FlagSet {
	usage, rest, _ := strings.Cut(text, "\n\n")
	desc, examples := rest, ""
	if i := strings.LastIndex(rest, "\nExamples:\n"); i >= 0 {
		desc, examples = rest[:i], rest[i+len("\nExamples:\n"):]
	}
	return NewFlagSet(name, usage, strings.TrimRight(desc, "\n"), examples)
}

// DocOf returns the Doc of a flag set made by NewFlagSet (the zero Doc,
// named after the set, for any other).
func DocOf(fs *flag.FlagSet) Doc {
	if f := fs.Lookup(ConfigFlag); f != nil {
		if cf, ok := f.Value.(*configFlag); ok {
			return cf.doc
		}
	}
	return Doc{Name: fs.Name()}
}

// Parse parses args into fs and returns the positional arguments. With
// interleaved, flags may come before, between or after them; without, a
// positional argument is an error. Then, when --config was given, the
// file's keys set the flags that the command line did not.
//
// Errors: flag.ErrHelp for -h/--help, ErrDescribed (see Command.FlagSet),
// anything else is a usage error whose text says what is wrong.
func Parse(fs *flag.FlagSet, args []string, interleaved bool) ([]string, error) {
	if len(args) == 1 && args[0] == describeArg {
		described = fs // under describeMu, held by Command.FlagSet
		return nil, ErrDescribed
	}
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		if !interleaved {
			return nil, &PositionalError{Arg: fs.Arg(0)}
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	if f := fs.Lookup(ConfigFlag); f != nil && f.Value.String() != "" {
		if err := LoadConfig(fs, f.Value.String()); err != nil {
			return nil, err
		}
	}
	return pos, nil
}

// PositionalError is an argument a command that takes none was given.
type PositionalError struct{ Arg string }

func (e *PositionalError) Error() string { return "unexpected argument " + quote(e.Arg) }

// Aliases maps each short flag to its long name: a short flag is one whose
// usage starts "short for --NAME".
func Aliases(fs *flag.FlagSet) map[string]string {
	m := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		rest, ok := strings.CutPrefix(f.Usage, "short for --")
		if long, _, _ := strings.Cut(rest, " "); ok && fs.Lookup(long) != nil {
			m[f.Name] = long
		}
	})
	return m
}

// Repeatable is a flag value that collects each value given (a list):
// a config file may give it a YAML list.
type Repeatable interface {
	flag.Value
	Repeatable() bool
}

// List is a repeatable string flag: each --flag VALUE appends.
type List []string

// String joins the values with commas.
func (l *List) String() string { return strings.Join(*l, ",") }

// Set appends v.
func (l *List) Set(v string) error { *l = append(*l, v); return nil }

// Repeatable is true: a config file may give a list.
func (l *List) Repeatable() bool { return true }
