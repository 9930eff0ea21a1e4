package cli

import "github.com/weir-dev/weir/internal/clidoc"

// Program describes every command of cmds for man pages and completions
// (internal/clidoc) from each command's flag set and help text
// (Command.FlagSet, DocOf, Entries): the same source 'weir CMD --help'
// prints. p gives the program's name, summary, description and version.
func Program(p clidoc.Program, cmds []Command) *clidoc.Program {
	for _, c := range cmds {
		d := clidoc.Command{Name: c.Name, Summary: c.Summary, Hidden: c.Hidden, Usage: p.Name + " " + c.Name}
		if fs := c.FlagSet(); fs != nil {
			doc := DocOf(fs)
			if doc.Usage != "" {
				d.Usage = doc.Usage
			}
			d.Description, d.Examples = doc.Description, doc.Examples
			for _, e := range Entries(fs) {
				f := clidoc.Flag{Long: e.Name, Arg: e.Arg, Usage: e.Usage, Default: e.Default}
				if e.Bool {
					f.Arg = ""
				}
				if len(e.Shorts) > 0 {
					f.Short = e.Shorts[0]
				}
				d.Flags = append(d.Flags, f)
			}
		}
		p.Commands = append(p.Commands, d)
	}
	return &p
}
