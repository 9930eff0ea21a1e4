package cli

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/format"
)

// DefaultDataDir is where capture writes and query reads unless told
// otherwise: $WEIR_DATA_DIR, else ./weir-data.
func DefaultDataDir() string {
	if d := os.Getenv("WEIR_DATA_DIR"); d != "" {
		return d
	}
	return "./weir-data"
}

// DataDirVar defines --data-dir and its short -d, defaulting to
// DefaultDataDir.
func DataDirVar(fs *flag.FlagSet, p *string, usage string) {
	fs.StringVar(p, "data-dir", DefaultDataDir(), usage)
	fs.StringVar(p, "d", DefaultDataDir(), "short for --data-dir")
}

// Selection are the flags that pick stored records (query, export):
// --iface, --condition, --from and --to, with their short forms.
type Selection struct {
	Ifaces    List
	Condition string
	From, To  string
}

// Flags defines the selection's flags on fs; from and to receive --from
// and --to (nil: the Selection's own fields).
func (s *Selection) Flags(fs *flag.FlagSet, from, to *string) {
	if from == nil {
		from, to = &s.From, &s.To
	}
	fs.Var(&s.Ifaces, "iface", "only these interfaces (comma-separated or repeated; default all)")
	fs.Var(&s.Ifaces, "i", "short for --iface")
	fs.StringVar(&s.Condition, "condition", "", "filter `expression` (instead of trailing arguments)")
	fs.StringVar(&s.Condition, "c", "", "short for --condition")
	fs.StringVar(from, "from", "", "start `time`: RFC 3339, a date, Unix seconds, or relative (-24h, -7d); default: everything stored")
	fs.StringVar(from, "f", "", "short for --from")
	fs.StringVar(to, "to", "", "end `time` (exclusive), same forms; default: now and beyond")
	fs.StringVar(to, "t", "", "short for --to")
}

// IsSet reports whether one of the flags names was given.
func IsSet(fs *flag.FlagSet, names ...string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || slices.Contains(names, f.Name) })
	return set
}

// Size is a byte count flag up to 1 GiB written as 4096, 256KiB, 1MiB.
type Size int

// String is the size as Set reads it (1MiB, 65536): a --config example
// of the default loads.
func (s *Size) String() string {
	for _, u := range []struct {
		sh   uint
		name string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n := int(*s); n != 0 && n%(1<<u.sh) == 0 {
			return strconv.Itoa(n>>u.sh) + u.name
		}
	}
	return strconv.Itoa(int(*s))
}

// Set parses v (ParseBytes, up to 1 GiB).
func (s *Size) Set(v string) error {
	n, err := ParseBytes(v, 1<<30)
	*s = Size(n)
	return err
}

// Bytes is a byte count flag up to 1 PiB (20GiB, 500MiB); 0 is allowed.
type Bytes int64

func (b *Bytes) String() string {
	if *b == 0 {
		return "0"
	}
	return fmt.Sprint(int64(*b))
}

// Set parses v: 0, or ParseBytes up to 1 PiB.
func (b *Bytes) Set(v string) error {
	if v == "0" {
		*b = 0
		return nil
	}
	n, err := ParseBytes(v, 1<<50)
	*b = Bytes(n)
	return err
}

// ParseBytes parses a byte count with an optional binary unit (K/KiB,
// M/MiB, G/GiB, T/TiB), positive and at most limit.
func ParseBytes(v string, limit int64) (int64, error) {
	mult := int64(1)
	num := v
	for _, u := range []struct {
		suf string
		m   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}} {
		if strings.HasSuffix(v, u.suf) {
			num, mult = strings.TrimSuffix(v, u.suf), u.m
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > limit/mult {
		return 0, fmt.Errorf("%q is not a size up to %s (examples: 65536, 256KiB, 1MiB, 20GiB)", v, format.Bytes(uint64(limit)))
	}
	return n * mult, nil
}

// Days is a duration flag that also takes days: 30d, 1d12h. Parse reads
// the day forms (query.ParseDuration; nil: time.ParseDuration).
type Days struct {
	D     time.Duration
	Parse func(string) (time.Duration, error)
}

func (d *Days) String() string {
	if d == nil || d.D == 0 {
		return "0"
	}
	if d.D%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d.D/(24*time.Hour))
	}
	return d.D.String()
}

// Set parses v: 0, or a duration with days.
func (d *Days) Set(v string) error {
	if v == "0" {
		d.D = 0
		return nil
	}
	parse := d.Parse
	if parse == nil {
		parse = time.ParseDuration
	}
	x, err := parse(v)
	if err != nil {
		return fmt.Errorf("%q is not a duration (examples: 30d, 12h, 1d12h)", v)
	}
	d.D = x
	return nil
}

// Uint16s parses comma-separated lists of numbers 0-65535; a bad one is
// "FLAG "X": a WHAT is 0-65535".
func Uint16s(list []string, flagName, what string) ([]uint16, error) {
	var out []uint16
	for _, s := range list {
		for _, part := range strings.Split(s, ",") {
			v, err := strconv.ParseUint(part, 0, 16)
			if err != nil {
				return nil, fmt.Errorf("%s %q: a %s is 0-65535", flagName, part, what)
			}
			out = append(out, uint16(v))
		}
	}
	return out, nil
}
