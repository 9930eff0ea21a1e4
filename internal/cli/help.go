package cli

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/format"
)

// Entry is one flag as help shows it: the long name with its short
// aliases, the value's name and the default.
type Entry struct {
	Name    string   // long name ("output"; a one-letter flag without a long name keeps it)
	Shorts  []string // short aliases ("o")
	Arg     string   // the value's name ("format"); "" for a boolean
	Usage   string
	Default string // as help shows it; "" when there is none worth showing
	Bool    bool
}

// Entries lists fs's flags for help, man pages and completions: one entry
// per long flag with its short aliases folded in, by name.
func Entries(fs *flag.FlagSet) []Entry {
	alias := Aliases(fs)
	shorts := map[string][]string{}
	for s, l := range alias {
		shorts[l] = append(shorts[l], s)
	}
	var out []Entry
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := alias[f.Name]; ok {
			return
		}
		arg, usage := flag.UnquoteUsage(f)
		e := Entry{Name: f.Name, Shorts: shorts[f.Name], Arg: arg, Usage: usage, Bool: isBool(f)}
		if !strings.Contains(usage, "default") {
			e.Default = ShowDefault(f)
		}
		out = append(out, e)
	})
	return out
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// ShowDefault is f's default as help shows it: "" for a zero default,
// counts with thousands separators (100,000), durations without trailing
// zero units (1m, not 1m0s).
func ShowDefault(f *flag.Flag) string {
	d := f.DefValue
	switch d {
	case "", "0", "0s", "false", "[]":
		return ""
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return d
	}
	switch v := g.Get().(type) {
	case int, int64, uint, uint64:
		if strings.Contains(f.Name, "port") || strings.Contains(f.Name, "seed") {
			return d // identifiers, not quantities
		}
		if n, err := strconv.ParseInt(d, 10, 64); err == nil {
			return Count(n)
		}
	case float64:
		if v == float64(int64(v)) && v >= 1000 {
			return Count(int64(v))
		}
	case time.Duration:
		return ShortDuration(v)
	}
	return d
}

// ShortDuration writes d as time.Duration does, less zero trailing units:
// 1m, 1h30m, 24h, 1.5s.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Count formats n with thousands separators: 100,000 (format.Int).
func Count(n int64) string { return format.Int(n) }

// WriteHelp writes a command's help: usage, description, flags (short
// aliases beside their long names, each default once) and examples.
func WriteHelp(w io.Writer, fs *flag.FlagSet) {
	d := DocOf(fs)
	fmt.Fprintf(w, "Usage:\n  %s\n", d.Usage)
	if d.Description != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(d.Description, "\n"))
	}
	if es := Entries(fs); len(es) > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		for _, e := range es {
			fmt.Fprintf(w, "  %s\n      %s", FlagSynopsis(e), e.Usage)
			if e.Default != "" {
				fmt.Fprintf(w, " (default %s)", e.Default)
			}
			fmt.Fprintln(w)
		}
	}
	if d.Examples != "" {
		fmt.Fprintf(w, "\nExamples:\n%s", d.Examples)
		if !strings.HasSuffix(d.Examples, "\n") {
			fmt.Fprintln(w)
		}
	}
}

// FlagSynopsis is "-o, --output format" (no value name for a boolean).
func FlagSynopsis(e Entry) string {
	var b strings.Builder
	for _, s := range e.Shorts {
		b.WriteString("-" + s + ", ")
	}
	if len(e.Name) == 1 {
		b.WriteString("-" + e.Name)
	} else {
		b.WriteString("--" + e.Name)
	}
	if !e.Bool && e.Arg != "" {
		b.WriteString(" " + e.Arg)
	}
	return b.String()
}

// WriteIndex writes the command list of 'weir help': every command not
// hidden with its summary, names aligned.
func WriteIndex(w io.Writer, cmds []Command) {
	width := 0
	for _, c := range cmds {
		if !c.Hidden {
			width = max(width, len(c.Name))
		}
	}
	for _, c := range cmds {
		if !c.Hidden {
			fmt.Fprintf(w, "  %-*s  %s\n", width, c.Name, c.Summary)
		}
	}
}

// Find returns the command args name (the longest match of its first
// words) and the arguments after the name.
func Find(cmds []Command, args []string) (Command, []string, bool) {
	for n := min(len(args), 3); n > 0; n-- {
		name := strings.Join(args[:n], " ")
		for _, c := range cmds {
			if c.Name == name {
				return c, args[n:], true
			}
		}
	}
	return Command{}, args, false
}

// Group returns the commands whose name starts with prefix and a space
// ("bench" → bench gendb, bench run, ...).
func Group(cmds []Command, prefix string) []Command {
	var out []Command
	for _, c := range cmds {
		if strings.HasPrefix(c.Name, prefix+" ") {
			out = append(out, c)
		}
	}
	return out
}

func quote(s string) string { return strconv.Quote(s) }
