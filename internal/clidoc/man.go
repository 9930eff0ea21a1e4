package clidoc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ManName is the man page name of a command: "weir-bench-run", or the
// program's own name for "".
func (p *Program) ManName(cmd string) string {
	if cmd == "" {
		return p.Name
	}
	return p.Name + "-" + strings.ReplaceAll(cmd, " ", "-")
}

// WriteManPages writes NAME.1 into dir for the program and every visible
// command, and returns the file names.
func (p *Program) WriteManPages(dir string) ([]string, error) {
	pages := []*Command{nil}
	for _, c := range p.Visible() {
		pages = append(pages, &c)
	}
	var names []string
	for _, c := range pages {
		name := p.ManName("")
		if c != nil {
			name = p.ManName(c.Name)
		}
		f, err := os.OpenFile(filepath.Join(dir, name+".1"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return names, err
		}
		err = p.WriteMan(f, c)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return names, fmt.Errorf("%s.1: %w", name, err)
		}
		names = append(names, name+".1")
	}
	return names, nil
}

// WriteMan writes the man page (roff, man macros) of c, or the program's
// own page, which lists every command, for nil.
func (p *Program) WriteMan(w io.Writer, c *Command) error {
	b := bufio.NewWriter(w)
	name, summary, usage, desc := p.ManName(""), p.Summary, p.Name+" COMMAND [flags]", p.Description
	if c != nil {
		name, summary, usage, desc = p.ManName(c.Name), c.Summary, c.Usage, c.Description
	}
	fmt.Fprintf(b, ".TH %s 1 %s %s %s\n", roffText(strings.ToUpper(name)), roffArg(p.Date), roffArg(p.Name+" "+p.Version), roffArg(p.Name+" manual"))
	b.WriteString(".SH NAME\n")
	fmt.Fprintf(b, "%s \\- %s\n", roffText(name), roffText(summary))
	b.WriteString(".SH SYNOPSIS\n")
	for _, l := range strings.Split(strings.TrimSpace(usage), "\n") {
		fmt.Fprintf(b, ".B %s\n.br\n", roffText(strings.TrimSpace(l)))
	}
	if desc != "" {
		b.WriteString(".SH DESCRIPTION\n")
		paragraphs(b, desc)
	}
	if c == nil {
		b.WriteString(".SH COMMANDS\n")
		for _, s := range p.Visible() {
			fmt.Fprintf(b, ".TP\n.B %s %s\n%s (\\fB%s\\fR(1))\n", roffText(p.Name), roffText(s.Name), roffText(s.Summary), roffText(p.ManName(s.Name)))
		}
	} else if len(c.Flags) > 0 {
		b.WriteString(".SH OPTIONS\n")
		for _, f := range c.Flags {
			b.WriteString(".TP\n")
			b.WriteString(flagSynopsis(&f) + "\n")
			text := f.Usage
			if f.Default != "" && !strings.Contains(text, "default") {
				text += " (default " + f.Default + ")"
			}
			b.WriteString(roffText(text) + "\n")
		}
	}
	if c != nil && strings.TrimSpace(c.Examples) != "" {
		b.WriteString(".SH EXAMPLES\n.nf\n")
		for _, l := range strings.Split(strings.TrimRight(c.Examples, "\n"), "\n") {
			b.WriteString(roffText(strings.TrimPrefix(l, "  ")) + "\n")
		}
		b.WriteString(".fi\n")
	}
	b.WriteString(".SH SEE ALSO\n")
	var see []string
	if c != nil {
		see = append(see, fmt.Sprintf(".BR %s (1)", roffText(p.Name)))
	} else {
		for _, s := range p.Visible() {
			see = append(see, fmt.Sprintf(".BR %s (1)", roffText(p.ManName(s.Name))))
		}
	}
	for i, s := range see {
		if i < len(see)-1 {
			s += " ,"
		}
		b.WriteString(s + "\n")
	}
	return b.Flush()
}

// flagSynopsis is a flag's tag line: bold names, italic value.
func flagSynopsis(f *Flag) string {
	var s strings.Builder
	if f.Short != "" {
		fmt.Fprintf(&s, "\\fB\\-%s\\fR, ", roffText(f.Short))
	}
	dash := "\\-\\-"
	if len(f.Long) == 1 {
		dash = "\\-"
	}
	fmt.Fprintf(&s, "\\fB%s%s\\fR", dash, roffText(f.Long))
	if f.Arg != "" {
		fmt.Fprintf(&s, " \\fI%s\\fR", roffText(f.Arg))
	}
	return s.String()
}

// paragraphs writes text's blank-line-separated paragraphs; lines that
// start with spaces are kept as they are (a table, a list of examples).
func paragraphs(b *bufio.Writer, text string) {
	for i, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if i > 0 {
			b.WriteString(".PP\n")
		}
		lines := strings.Split(para, "\n")
		indented := false
		for _, l := range lines {
			if strings.HasPrefix(l, "  ") {
				indented = true
			}
		}
		if indented {
			b.WriteString(".nf\n")
		}
		for _, l := range lines {
			b.WriteString(roffText(l) + "\n")
		}
		if indented {
			b.WriteString(".fi\n")
		}
	}
}

// roffText escapes text for a roff line: backslashes, hyphens (a man page
// reader searches for \- in options), and a leading dot or quote, which
// would make the line a request.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// roffArg quotes a macro argument.
func roffArg(s string) string {
	return `"` + strings.ReplaceAll(roffText(s), `"`, `\(dq`) + `"`
}
