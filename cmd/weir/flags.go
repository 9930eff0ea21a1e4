package main

import (
	"flag"
	"fmt"
	"strings"
)

// newFlagSet returns a FlagSet whose help shows usage, a description, the
// flags in --long form with defaults, and examples.
func newFlagSet(name, usageLine, description, examples string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage:\n  %s\n\n%s\n", usageLine, description)
		var b strings.Builder
		fs.VisitAll(func(f *flag.Flag) {
			name, typ := f.Name, ""
			if t, u := flag.UnquoteUsage(f); t != "" {
				typ = " " + t
				_ = u
			}
			dash := "--"
			if len(name) == 1 {
				dash = "-"
			}
			fmt.Fprintf(&b, "  %s%s%s\n", dash, name, typ)
			_, u := flag.UnquoteUsage(f)
			fmt.Fprintf(&b, "      %s", u)
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
				fmt.Fprintf(&b, " (default %s)", f.DefValue)
			}
			b.WriteString("\n")
		})
		if b.Len() > 0 {
			fmt.Fprintf(w, "\nFlags:\n%s", b.String())
		}
		if examples != "" {
			fmt.Fprintf(w, "\nExamples:\n%s", examples)
		}
	}
	return fs
}
