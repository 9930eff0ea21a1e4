package cli

import (
	"errors"
	"flag"
	"strings"
)

// ModeRule says which modes (a bit set of the command's own) a group of
// flags applies to, and what to say when one is given in another mode.
type ModeRule struct {
	// Names are space-separated flag names; one ending in '-' is a
	// prefix ("ct-" is every --ct-* flag).
	Names string
	Modes uint
	// Need ends the message: "--a, --b " + Need.
	Need string
}

// CheckModes refuses the flags given on fs that a rule says do not apply
// to mode m: one message, for the first rule broken, naming every flag
// given against it. A flag no rule lists applies to every mode.
func CheckModes(fs *flag.FlagSet, rules []ModeRule, m uint) error {
	bad := make([][]string, len(rules))
	fs.Visit(func(f *flag.Flag) {
		for i, r := range rules {
			if r.Modes&m == 0 && matches(r.Names, f.Name) {
				dash := "--"
				if len(f.Name) == 1 {
					dash = "-"
				}
				bad[i] = append(bad[i], dash+f.Name)
			}
		}
	})
	for i, names := range bad {
		if len(names) > 0 {
			return errors.New(strings.Join(names, ", ") + " " + rules[i].Need)
		}
	}
	return nil
}

// matches reports whether name is one of the space-separated names, or
// starts with one of them that ends in '-'.
func matches(names, name string) bool {
	for _, n := range strings.Fields(names) {
		if n == name || strings.HasSuffix(n, "-") && strings.HasPrefix(name, n) {
			return true
		}
	}
	return false
}
