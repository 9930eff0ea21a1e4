package profile

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxFileSize bounds a profile file.
const MaxFileSize = 1 << 20

// ParseYAML reads weir's YAML profile (docs/bench-profiles.md); name is the
// file name used in errors ("name:line: ..."). Unknown keys, YAML aliases
// and files over MaxFileSize are errors. The profile is validated.
func ParseYAML(data []byte, name string) (*Profile, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: %d bytes, at most %d", name, len(data), MaxFileSize)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty profile", name)
	}
	y := &yreader{file: name}
	p := y.profile(doc.Content[0])
	if y.err != nil {
		return nil, y.err
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// yreader walks the YAML node tree, keeping the first error with its line.
type yreader struct {
	file string
	err  error
}

func (y *yreader) fail(n *yaml.Node, format string, a ...any) {
	if y.err == nil {
		y.err = fmt.Errorf("%s:%d: %s", y.file, n.Line, fmt.Sprintf(format, a...))
	}
}

// fields returns a mapping's values by key, refusing other keys, aliases
// and repeated keys.
func (y *yreader) fields(n *yaml.Node, what string, allowed ...string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if n.Kind == yaml.AliasNode {
		y.fail(n, "YAML aliases are not accepted")
		return out
	}
	if n.Kind != yaml.MappingNode {
		y.fail(n, "%s: want a mapping", what)
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind == yaml.AliasNode || k.Kind == yaml.AliasNode {
			y.fail(v, "YAML aliases are not accepted")
			return out
		}
		if !contains(allowed, k.Value) {
			y.fail(k, "%s: unknown key %q (known: %s)", what, k.Value, strings.Join(allowed, ", "))
			return out
		}
		if _, dup := out[k.Value]; dup {
			y.fail(k, "%s: %q given twice", what, k.Value)
			return out
		}
		out[k.Value] = v
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (y *yreader) scalar(n *yaml.Node, what string) string {
	if n == nil {
		return ""
	}
	if n.Kind != yaml.ScalarNode {
		y.fail(n, "%s: want a value", what)
		return ""
	}
	return n.Value
}

func (y *yreader) list(n *yaml.Node, what string) []*yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		y.fail(n, "%s: want a list", what)
		return nil
	}
	return n.Content
}

func (y *yreader) int(n *yaml.Node, what string) int {
	s := y.scalar(n, what)
	if n == nil || y.err != nil {
		return 0
	}
	v, err := ParseCount(s)
	if err != nil {
		y.fail(n, "%s: %v", what, err)
	}
	return v
}

func (y *yreader) size(n *yaml.Node, what string) int {
	s := y.scalar(n, what)
	if n == nil || y.err != nil {
		return 0
	}
	v, err := ParseSize(s)
	if err != nil {
		y.fail(n, "%s: %v", what, err)
	}
	return v
}

func (y *yreader) bool(n *yaml.Node, what string) bool {
	s := y.scalar(n, what)
	if n == nil || y.err != nil {
		return false
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		y.fail(n, "%s: %q: want true or false", what, s)
	}
	return v
}

func (y *yreader) profile(n *yaml.Node) *Profile {
	f := y.fields(n, "profile", "name", "groups")
	p := &Profile{Name: y.scalar(f["name"], "name")}
	if f["groups"] == nil && y.err == nil {
		y.fail(n, "profile: no groups")
	}
	for _, gn := range y.list(f["groups"], "groups") {
		gf := y.fields(gn, "group", "name", "nthreads", "transactions")
		g := Group{Name: y.scalar(gf["name"], "name"), Threads: y.int(gf["nthreads"], "nthreads")}
		if gf["nthreads"] == nil && y.err == nil {
			y.fail(gn, "group: nthreads is required")
		}
		for _, tn := range y.list(gf["transactions"], "transactions") {
			g.Txns = append(g.Txns, y.txn(tn))
		}
		p.Groups = append(p.Groups, g)
	}
	return p
}

func (y *yreader) txn(n *yaml.Node) Txn {
	f := y.fields(n, "transaction", "name", "iterations", "duration", "flowops")
	t := Txn{Name: y.scalar(f["name"], "name"), Iterations: y.int(f["iterations"], "iterations")}
	if d := f["duration"]; d != nil {
		v, err := ParseDuration(y.scalar(d, "duration"))
		if err != nil {
			y.fail(d, "%v", err)
		}
		t.Duration = v
	}
	if (f["iterations"] == nil) == (f["duration"] == nil) && y.err == nil {
		y.fail(n, "transaction: give exactly one of iterations and duration")
	}
	for _, on := range y.list(f["flowops"], "flowops") {
		t.Ops = append(t.Ops, y.op(on))
	}
	return t
}

// opKeys are the keys each op accepts besides "op".
var opKeys = map[string][]string{
	"connect":    {"protocol", "family", "network", "nodelay", "wndsz"},
	"write":      {"size", "count"},
	"read":       {"size", "count", "timeout"},
	"sendto":     {"size", "count"},
	"recvfrom":   {"size", "count", "timeout"},
	"disconnect": {},
	"think":      {"duration", "idle"},
}

func (y *yreader) op(n *yaml.Node) Op {
	var kind string
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "op" {
				kind = n.Content[i+1].Value
			}
		}
	}
	keys, ok := opKeys[kind]
	if !ok {
		if y.err == nil {
			y.fail(n, "flowop: op %q: want connect, write, read, sendto, recvfrom, disconnect or think", kind)
		}
		return Op{}
	}
	f := y.fields(n, kind, append([]string{"op"}, keys...)...)
	op := Op{Kind: kindByName[kind]}
	var err error
	switch op.Kind {
	case Connect:
		op.Proto, err = protoByName(y.scalar(f["protocol"], "protocol"))
		if err == nil {
			op.IPv6, err = familyByName(y.scalar(f["family"], "family"))
		}
		if err == nil {
			op.Net, err = networkByName(y.scalar(f["network"], "network"))
		}
		op.NoDelay = y.bool(f["nodelay"], "nodelay")
		op.WndSz = y.size(f["wndsz"], "wndsz")
	case Think:
		if d := f["duration"]; d != nil {
			op.Duration, err = ParseDuration(y.scalar(d, "duration"))
		}
		op.Idle = y.bool(f["idle"], "idle")
	case Disconnect:
	default:
		op.Size = y.size(f["size"], "size")
		if f["size"] == nil && y.err == nil {
			y.fail(n, "%s: size is required", kind)
		}
		op.Count = y.int(f["count"], "count")
		if f["count"] == nil {
			op.Count = 1
		}
		if d := f["timeout"]; d != nil {
			op.Timeout, err = ParseDuration(y.scalar(d, "timeout"))
		}
	}
	if err != nil {
		y.fail(n, "%s: %v", kind, err)
	}
	return op
}

var kindByName = map[string]OpKind{
	"connect": Connect, "write": Write, "read": Read, "sendto": SendTo,
	"recvfrom": RecvFrom, "disconnect": Disconnect, "think": Think,
}

func protoByName(s string) (Proto, error) {
	switch strings.ToLower(s) {
	case "", "tcp":
		return TCP, nil
	case "udp":
		return UDP, nil
	}
	return 0, fmt.Errorf("protocol %q: want tcp or udp", s)
}

func familyByName(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "", "ipv4", "inet", "4":
		return false, nil
	case "ipv6", "inet6", "6":
		return true, nil
	}
	return false, fmt.Errorf("family %q: want ipv4 or ipv6", s)
}

func networkByName(s string) (Network, error) {
	switch strings.ToLower(s) {
	case "", "primary":
		return Primary, nil
	case "secondary":
		return Secondary, nil
	}
	return 0, errors.New("network " + strconv.Quote(s) + ": want primary or secondary")
}
