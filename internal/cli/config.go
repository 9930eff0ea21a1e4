package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxConfigSize bounds a config file: a file larger than this is refused
// before it is parsed (memory stays bounded whatever the file holds).
const MaxConfigSize = 1 << 20

// ConfigError is a mistake in a config file, at a line.
type ConfigError struct {
	File string
	Line int // 0 when the mistake has no line (the file cannot be read)
	Msg  string
}

func (e *ConfigError) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// LoadConfig reads the YAML config file at path into fs: each key is a
// long flag name, its value what the flag would be given (a list, for a
// Repeatable flag, gives each element). Keys whose flag (or one of its
// short aliases) was set on the command line are skipped: the command line
// wins. An unknown key, a short name, a duplicate key, a list for a flag
// that takes one value, or a value the flag refuses is a *ConfigError with
// the line.
func LoadConfig(fs *flag.FlagSet, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return &ConfigError{File: path, Msg: err.Error()}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigSize+1))
	if err != nil {
		return &ConfigError{File: path, Msg: err.Error()}
	}
	if len(data) > MaxConfigSize {
		return &ConfigError{File: path, Msg: fmt.Sprintf("larger than %s bytes: not a config file", Count(MaxConfigSize))}
	}
	return ApplyConfig(fs, path, data)
}

// ApplyConfig is LoadConfig of data already read; name is the file's name
// for errors.
func ApplyConfig(fs *flag.FlagSet, name string, data []byte) error {
	m, err := configMapping(name, data)
	if m == nil || err != nil {
		return err
	}
	set := map[string]bool{}
	alias := Aliases(fs)
	fs.Visit(func(f *flag.Flag) {
		set[f.Name] = true
		if l, ok := alias[f.Name]; ok {
			set[l] = true
		}
	})
	seen := map[string]int{}
	bad := func(n *yaml.Node, format string, a ...any) error {
		return &ConfigError{File: name, Line: n.Line, Msg: fmt.Sprintf(format, a...)}
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return bad(k, "a key must be a flag name")
		}
		key := k.Value
		if line, dup := seen[key]; dup {
			return bad(k, "%s is given twice (also on line %d)", key, line)
		}
		seen[key] = k.Line
		if err := checkKey(fs, alias, key); err != nil {
			return bad(k, "%v", err)
		}
		if set[key] {
			continue // the command line wins
		}
		if err := setValue(fs, key, v); err != nil {
			return bad(v, "%s: %v", key, err)
		}
	}
	return nil
}

// configMapping parses data as one YAML document holding a mapping (nil
// for an empty file).
func configMapping(name string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil
	} else if err != nil {
		return nil, &ConfigError{File: name, Line: yamlLine(err), Msg: "not YAML: " + err.Error()}
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, &ConfigError{File: name, Line: more.Line, Msg: "one document only: a config file holds one command's flags"}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	m := doc.Content[0]
	if m.Kind == yaml.ScalarNode && m.Tag == "!!null" {
		return nil, nil
	}
	if m.Kind != yaml.MappingNode {
		return nil, &ConfigError{File: name, Line: m.Line, Msg: "want a mapping of flag names to values (read: trace.pcap)"}
	}
	return m, nil
}

// yamlLine digs the line out of a yaml.v3 syntax error ("yaml: line 3: ...").
func yamlLine(err error) int {
	var line int
	if _, e := fmt.Sscanf(strings.TrimPrefix(err.Error(), "yaml: "), "line %d:", &line); e == nil {
		return line
	}
	return 0
}

// checkKey says what is wrong with key as a flag name of fs.
func checkKey(fs *flag.FlagSet, alias map[string]string, key string) error {
	if key == ConfigFlag {
		return errors.New("config files do not include other config files")
	}
	if l, ok := alias[key]; ok {
		return fmt.Errorf("%s is a short flag: use its long name, %s", key, l)
	}
	if fs.Lookup(key) != nil {
		return nil
	}
	msg := fmt.Sprintf("unknown key %s: weir %s has no flag --%s", quote(key), fs.Name(), key)
	if s := closest(fs, alias, key); s != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", s)
	}
	return errors.New(msg)
}

// setValue gives flag key the value(s) of node v.
func setValue(fs *flag.FlagSet, key string, v *yaml.Node) error {
	switch {
	case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
		return errors.New("no value: give one, or leave the key out")
	case v.Kind == yaml.ScalarNode:
		return fs.Set(key, v.Value)
	case v.Kind == yaml.SequenceNode:
		if r, ok := fs.Lookup(key).Value.(Repeatable); !ok || !r.Repeatable() {
			return errors.New("takes one value, not a list")
		}
		for _, e := range v.Content {
			if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
				return fmt.Errorf("line %d: each element must be one value", e.Line)
			}
			if err := fs.Set(key, e.Value); err != nil {
				return fmt.Errorf("line %d: %v", e.Line, err)
			}
		}
		return nil
	case v.Kind == yaml.AliasNode:
		return errors.New("YAML aliases (*name) are not supported in config files")
	}
	return errors.New("want a value or a list, not a mapping")
}

// closest is the long flag name nearest to key (at most 2 edits), or "".
func closest(fs *flag.FlagSet, alias map[string]string, key string) string {
	best, bestD := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		if _, short := alias[f.Name]; short || f.Name == ConfigFlag {
			return
		}
		if d := editDistance(key, f.Name); d < bestD {
			best, bestD = f.Name, d
		}
	})
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// WriteExample writes a complete config file for fs: every long flag as a
// commented-out key with its default, under its help text. Uncommenting a
// key line gives a file that LoadConfig accepts.
func WriteExample(w io.Writer, fs *flag.FlagSet) error {
	d := DocOf(fs)
	fmt.Fprintf(w, "# weir %s --config FILE\n#\n", d.Name)
	fmt.Fprintf(w, "# Keys are the long flags of 'weir %s --help'; flags on the command line\n", d.Name)
	fmt.Fprintf(w, "# win over the file, the file over the defaults shown. Uncomment to set.\n")
	for _, e := range Entries(fs) {
		if e.Name == ConfigFlag || len(e.Name) == 1 {
			continue
		}
		fmt.Fprintln(w)
		for _, l := range wrap(e.Usage, 74) {
			fmt.Fprintf(w, "# %s\n", l)
		}
		fmt.Fprintf(w, "# %s: %s\n", e.Name, exampleValue(fs.Lookup(e.Name)))
	}
	return nil
}

// exampleValue is f's default as YAML: a list for a Repeatable flag, a
// plain scalar for numbers, booleans and durations, a string quoted as
// YAML needs.
func exampleValue(f *flag.Flag) string {
	if r, ok := f.Value.(Repeatable); ok && r.Repeatable() {
		if f.DefValue == "" {
			return "[]"
		}
		return "[" + yamlString(f.DefValue) + "]"
	}
	if g, ok := f.Value.(flag.Getter); ok {
		if _, isStr := g.Get().(string); !isStr && f.DefValue != "" {
			return f.DefValue
		}
	}
	return yamlString(f.DefValue)
}

func yamlString(s string) string {
	b, err := yaml.Marshal(s)
	if err != nil {
		return quote(s)
	}
	return strings.TrimSuffix(string(b), "\n")
}

// wrap breaks s into lines of at most width (longer words stay whole).
func wrap(s string, width int) []string {
	var lines []string
	var cur string
	for _, word := range strings.Fields(s) {
		if cur != "" && len(cur)+1+len(word) > width {
			lines = append(lines, cur)
			cur = ""
		}
		if cur != "" {
			cur += " "
		}
		cur += word
	}
	if cur != "" || len(lines) == 0 {
		lines = append(lines, cur)
	}
	return slices.Clip(lines)
}
