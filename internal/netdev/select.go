package netdev

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// maxSpec bounds one spec's length, so a hostile command line cannot make
// the parser (or the regexp compiler) do unbounded work.
const maxSpec = 4096

// Selector decides which links a capture uses. It is built from the specs
// of the command line (-i), each one of:
//
//   - a link name ("eth0"), matched exactly, whatever the link's state:
//     the capture decides what to do with a named link that is down;
//   - a comma-separated list of names ("eth0,eth1"), which may contain "any";
//   - "any": every link that is Up and not a loopback; "lo" (or any
//     loopback) is only selected when named explicitly ("any,lo");
//   - "/regex/": the whole spec between the slashes is a Go regexp
//     (RE2 syntax), matched against link names unanchored, as grep does:
//     /veth/ matches "myveth0", write /^veth/ or /^veth[0-9]+$/ to anchor.
//     Loopback and down links match too when their name does. A regex is
//     always a spec of its own: it is not split at commas.
//
// A Selector is immutable and safe for concurrent use.
type Selector struct {
	any   bool
	names []string // in order of first appearance, without repeats
	res   []*regexp.Regexp
	set   map[string]struct{}
}

// ParseSelector builds a Selector from specs. It fails on an empty spec or
// list element, a name longer than 15 bytes or one the kernel would refuse
// ("." and "..", or containing '/', ':' or white space), an empty regex,
// and a regex that does not compile (the error names the spec and quotes
// the compiler's complaint).
func ParseSelector(specs []string) (*Selector, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("netdev: no interface given")
	}
	s := &Selector{set: make(map[string]struct{})}
	for i, spec := range specs {
		if err := s.add(spec); err != nil {
			return nil, fmt.Errorf("netdev: interface spec %d %q: %w", i+1, clip(spec), err)
		}
	}
	return s, nil
}

// add parses one spec into s.
func (s *Selector) add(spec string) error {
	if len(spec) > maxSpec {
		return fmt.Errorf("longer than %d bytes", maxSpec)
	}
	if strings.TrimSpace(spec) == "" {
		return fmt.Errorf("empty")
	}
	if strings.HasPrefix(spec, "/") {
		if len(spec) < 2 || !strings.HasSuffix(spec, "/") {
			return fmt.Errorf("a regex must be written /regex/ (missing closing '/')")
		}
		expr := spec[1 : len(spec)-1]
		if expr == "" {
			return fmt.Errorf("empty regex (use \"any\" for all links)")
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return fmt.Errorf("bad regex /%s/: %w", expr, err)
		}
		s.res = append(s.res, re)
		return nil
	}
	for j, name := range strings.Split(spec, ",") {
		if err := s.addName(name); err != nil {
			return fmt.Errorf("element %d %q: %w", j+1, name, err)
		}
	}
	return nil
}

// addName adds one element of a comma-separated list.
func (s *Selector) addName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty name")
	case name == "any":
		s.any = true
		return nil
	case strings.HasPrefix(name, "/"):
		return fmt.Errorf("a /regex/ must be a spec of its own, not part of a comma-separated list")
	case len(name) >= ifNamSiz:
		return fmt.Errorf("name is %d bytes, longer than the kernel's limit of %d", len(name), ifNamSiz-1)
	case name == "." || name == "..":
		return fmt.Errorf("not a valid interface name")
	case strings.ContainsFunc(name, func(r rune) bool { return r == '/' || r == ':' || unicode.IsSpace(r) }):
		return fmt.Errorf("interface names cannot contain '/', ':' or white space")
	}
	if _, dup := s.set[name]; !dup {
		s.set[name] = struct{}{}
		s.names = append(s.names, name)
	}
	return nil
}

// clip shortens a spec for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// Match reports whether the capture should use l: l is named, or its name
// matches one of the regexes, or "any" was given and l is Up and not a
// loopback.
func (s *Selector) Match(l Link) bool {
	if s.any && l.Up && !l.Loopback {
		return true
	}
	if _, ok := s.set[l.Name]; ok {
		return true
	}
	for _, re := range s.res {
		if re.MatchString(l.Name) {
			return true
		}
	}
	return false
}

// Any reports whether "any" was given.
func (s *Selector) Any() bool { return s.any }

// Names returns the names given explicitly, in order of first appearance.
func (s *Selector) Names() []string { return append([]string(nil), s.names...) }

// String describes the selector in spec form, for logs: "any" first, then
// the names as one comma-separated list, then each regex as /regex/,
// separated by spaces.
func (s *Selector) String() string {
	var parts []string
	if s.any {
		parts = append(parts, "any")
	}
	if len(s.names) > 0 {
		parts = append(parts, strings.Join(s.names, ","))
	}
	for _, re := range s.res {
		parts = append(parts, "/"+re.String()+"/")
	}
	return strings.Join(parts, " ")
}
