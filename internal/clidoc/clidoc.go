// Package clidoc renders a command-line program's reference — man pages
// and bash, zsh and fish completions — from the same description its help
// text is made of: each command's usage line, description, flags and
// examples. weir's CLI hands it a Program (cmd/weir/gendocs.go); nothing
// here knows weir's commands.
package clidoc

import (
	"flag"
	"reflect"
	"sort"
	"strings"
)

// Program is the whole command line.
type Program struct {
	Name        string // "weir"
	Summary     string // one line: the man page's NAME
	Description string // paragraphs separated by blank lines
	Version     string // shown in the man page's footer
	Date        string // shown in the man page's footer ("" leaves it out)
	Commands    []Command
}

// Command is one command a user types: "capture", or "bench run" for a
// subcommand of a group.
type Command struct {
	Name        string // words after the program's name, space-separated
	Summary     string // one line, lower case, no full stop
	Usage       string // the synopsis, starting with the program's name
	Description string // paragraphs separated by blank lines
	Examples    string // one example a line (comments after #)
	Flags       []Flag
	Hidden      bool // not completed, and no man page
}

// Flag is one option, with its one-letter alias if it has one.
type Flag struct {
	Long    string // name without dashes (a one-letter flag has only Long)
	Short   string // one-letter alias, or ""
	Arg     string // the value's name ("file", "duration"); "" for a boolean
	Usage   string
	Default string // "" when the default says nothing (zero, false, empty)
}

// File reports whether the flag's value is a path, so completion offers
// files.
func (f *Flag) File() bool {
	switch f.Arg {
	case "file", "dir", "path", "FILE", "DIR", "PATH":
		return true
	}
	return false
}

// FlagsOf returns fs's flags in name order, a one-letter flag that shares
// its value with a longer one folded into it as its Short.
func FlagsOf(fs *flag.FlagSet) []Flag {
	type entry struct {
		f   *flag.Flag
		ptr uintptr
	}
	var all []entry
	fs.VisitAll(func(f *flag.Flag) { all = append(all, entry{f, valuePtr(f.Value)}) })
	longFor := map[uintptr]string{} // value -> the longest name sharing it
	for _, e := range all {
		if e.ptr != 0 && len(e.f.Name) > len(longFor[e.ptr]) {
			longFor[e.ptr] = e.f.Name
		}
	}
	byLong := map[string]*Flag{}
	var out []Flag
	for _, e := range all {
		if len(e.f.Name) == 1 && e.ptr != 0 && longFor[e.ptr] != e.f.Name {
			continue // folded into its long form below
		}
		arg, usage := flag.UnquoteUsage(e.f)
		if isBool(e.f) {
			arg = ""
		}
		out = append(out, Flag{Long: e.f.Name, Arg: arg, Usage: usage, Default: defaultOf(e.f)})
	}
	for i := range out {
		byLong[out[i].Long] = &out[i]
	}
	for _, e := range all {
		if len(e.f.Name) == 1 && e.ptr != 0 && longFor[e.ptr] != e.f.Name {
			if l := byLong[longFor[e.ptr]]; l != nil {
				l.Short = e.f.Name
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Long < out[j].Long })
	return out
}

// valuePtr is the address a flag.Value points at: the flag package's own
// values are pointers to the variable (StringVar(&v, ...) twice gives two
// Values at one address), so aliases of one variable share it.
func valuePtr(v flag.Value) uintptr {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return 0
	}
	return rv.Pointer()
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// defaultOf is the default worth showing: not the zero values.
func defaultOf(f *flag.Flag) string {
	switch f.DefValue {
	case "", "0", "false", "0s", "[]":
		return ""
	}
	return f.DefValue
}

// Visible returns the commands that are not hidden.
func (p *Program) Visible() []Command {
	var out []Command
	for _, c := range p.Commands {
		if !c.Hidden {
			out = append(out, c)
		}
	}
	return out
}

// tops returns the first words of the visible commands, in order, each
// once, with the summary of the command of that one word (or of its
// group's first subcommand).
func (p *Program) tops() (names []string, summary map[string]string) {
	summary = map[string]string{}
	for _, c := range p.Visible() {
		top, _, _ := strings.Cut(c.Name, " ")
		if _, ok := summary[top]; !ok {
			names = append(names, top)
			summary[top] = ""
		}
		if c.Name == top || summary[top] == "" {
			summary[top] = c.Summary
		}
	}
	return names, summary
}

// subs returns the second words under group top, in order.
func (p *Program) subs(top string) []Command {
	var out []Command
	for _, c := range p.Visible() {
		if g, _, ok := strings.Cut(c.Name, " "); ok && g == top {
			out = append(out, c)
		}
	}
	return out
}

// short is the first clause of a usage text, for completion menus.
func short(s string) string {
	for _, sep := range []string{"; ", ". ", " ("} {
		if i := strings.Index(s, sep); i > 0 {
			s = s[:i]
		}
	}
	if len(s) > 70 {
		s = s[:67] + "..."
	}
	return s
}
