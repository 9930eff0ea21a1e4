package enrich

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/weir-dev/weir/internal/enrich/services"
)

// MaxInventoryBytes bounds an inventory file: a larger one is refused
// before it is parsed, so that a runaway file cannot exhaust memory. The
// YAML parser allocates 40 to 120 times the size of a file of tiny
// entries; 16 MiB holds about 150,000 workloads written one key a line,
// more in flow style.
const MaxInventoryBytes = 16 << 20

// The inventory file format (docs/enrich.md). Every entry decodes through
// an UnmarshalYAML that records its line and refuses unknown keys.
type fileInventory struct {
	Workloads []fileWorkload `yaml:"workloads"`
	LBs       []fileLB       `yaml:"load_balancers"`
	Groups    []fileGroup    `yaml:"lb_groups"`
	Nodes     []fileNode     `yaml:"nodes"`
}

type fileWorkload struct {
	line      int
	Name      string            `yaml:"name"`
	Namespace string            `yaml:"namespace"`
	Node      string            `yaml:"node"`
	Kind      string            `yaml:"kind"`
	Labels    map[string]string `yaml:"labels"`
	IPs       []lineString      `yaml:"ips"`
}

type fileLB struct {
	line     int
	Name     string      `yaml:"name"`
	Protocol lineString  `yaml:"protocol"`
	VIPs     vipList     `yaml:"vips"`
	Options  fileOptions `yaml:"options"`
}

type fileOptions struct {
	SkipSNAT        bool       `yaml:"skip_snat"`
	ForceSNAT       bool       `yaml:"force_snat"`
	Reject          bool       `yaml:"reject"`
	HairpinSNATIP   lineString `yaml:"hairpin_snat_ip"`
	AffinityTimeout uint32     `yaml:"affinity_timeout"`
}

type fileGroup struct {
	line int
	Name string   `yaml:"name"`
	LBs  []string `yaml:"load_balancers"`
}

type fileNode struct {
	line         int
	Name         string       `yaml:"name"`
	Switch       string       `yaml:"switch"`
	Router       string       `yaml:"router"`
	Subnets      []lineString `yaml:"subnets"`
	Groups       []string     `yaml:"groups"`
	SwitchGroups []string     `yaml:"switch_groups"`
	RouterGroups []string     `yaml:"router_groups"`
	LBs          []string     `yaml:"load_balancers"`
	SwitchLBs    []string     `yaml:"switch_load_balancers"`
	RouterLBs    []string     `yaml:"router_load_balancers"`
}

// lineString is a scalar and the line it is on.
type lineString struct {
	s    string
	line int
}

func (l *lineString) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return fmt.Errorf("line %d: want a string, got %s", n.Line, kindName(n))
	}
	l.s, l.line = n.Value, n.Line
	return nil
}

// vipList is the vips mapping ("frontend": [backends]) in file order.
type vipList []fileVIP

type fileVIP struct {
	frontend lineString
	backends []lineString
}

func (v *vipList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: vips: want a mapping of \"VIP:port\": [\"backend:port\", ...], got %s", n.Line, kindName(n))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		var fv fileVIP
		if err := n.Content[i].Decode(&fv.frontend); err != nil {
			return err
		}
		if err := n.Content[i+1].Decode(&fv.backends); err != nil {
			return err
		}
		*v = append(*v, fv)
	}
	return nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	if n.Tag == "!!null" {
		return "nothing"
	}
	return fmt.Sprintf("%q", n.Value)
}

// decodeStrict decodes mapping n into v (a pointer to a plain struct
// type) after checking that every key is one of v's yaml field names:
// Node.Decode does not refuse unknown fields by itself.
func decodeStrict(n *yaml.Node, what string, v any, known ...string) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want %s (a mapping), got %s", n.Line, what, kindName(n))
	}
	for i := 0; i < len(n.Content); i += 2 {
		k := n.Content[i]
		if !slices.Contains(known, k.Value) {
			return fmt.Errorf("line %d: unknown field %q in %s (known: %s)", k.Line, k.Value, what, strings.Join(known, ", "))
		}
	}
	return n.Decode(v)
}

// UnmarshalYAML refuses aliases anywhere in the document (expanding them
// could multiply a small file into a huge inventory), then decodes the
// sections strictly.
func (f *fileInventory) UnmarshalYAML(n *yaml.Node) error {
	if a := findAlias(n); a != nil {
		return fmt.Errorf("line %d: aliases (*%s) are not supported in an inventory: write the entries out", a.Line, a.Value)
	}
	type plain fileInventory
	return decodeStrict(n, "an inventory", (*plain)(f), "workloads", "load_balancers", "lb_groups", "nodes")
}

// findAlias returns the first alias node under n, or nil (the parser
// bounds the depth).
func findAlias(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode {
		return n
	}
	for _, c := range n.Content {
		if a := findAlias(c); a != nil {
			return a
		}
	}
	return nil
}

func (w *fileWorkload) UnmarshalYAML(n *yaml.Node) error {
	type plain fileWorkload
	w.line = n.Line
	return decodeStrict(n, "a workload", (*plain)(w), "name", "namespace", "node", "kind", "labels", "ips")
}

func (l *fileLB) UnmarshalYAML(n *yaml.Node) error {
	type plain fileLB
	l.line = n.Line
	return decodeStrict(n, "a load balancer", (*plain)(l), "name", "protocol", "vips", "options")
}

func (o *fileOptions) UnmarshalYAML(n *yaml.Node) error {
	type plain fileOptions
	return decodeStrict(n, "load balancer options", (*plain)(o), "skip_snat", "force_snat", "reject", "hairpin_snat_ip", "affinity_timeout")
}

func (g *fileGroup) UnmarshalYAML(n *yaml.Node) error {
	type plain fileGroup
	g.line = n.Line
	return decodeStrict(n, "a load balancer group", (*plain)(g), "name", "load_balancers")
}

func (d *fileNode) UnmarshalYAML(n *yaml.Node) error {
	type plain fileNode
	d.line = n.Line
	return decodeStrict(n, "a node", (*plain)(d), "name", "switch", "router", "subnets", "groups", "switch_groups",
		"router_groups", "load_balancers", "switch_load_balancers", "router_load_balancers")
}

// ReadInventoryFile reads and decodes an inventory file (see
// DecodeInventory), refusing one larger than MaxInventoryBytes.
func ReadInventoryFile(path string) (Inventory, error) {
	data, err := readBounded(path)
	if err != nil {
		return Inventory{}, err
	}
	return DecodeInventory(path, data)
}

// readBounded reads a file of at most MaxInventoryBytes.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxInventoryBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxInventoryBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB: refused", path, MaxInventoryBytes>>20)
	}
	return data, nil
}

// DecodeInventory decodes an inventory file's contents, YAML or JSON
// (by name's extension: .json is JSON, .yaml/.yml YAML; otherwise JSON when
// the first non-space byte is '{'), strictly: unknown fields, malformed
// addresses and an invalid inventory (Inventory.Validate) are errors.
// Errors are prefixed with name and the line of the problem
// ("inv.yaml:12: ...").
func DecodeInventory(name string, data []byte) (Inventory, error) {
	prefix := func(err error) error { return prefixErrors(name, err) }
	if isJSON(name, data) {
		var err error
		if data, err = jsonForYAML(data); err != nil {
			return Inventory{}, prefix(err)
		}
	}
	var f fileInventory
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return Inventory{}, prefix(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return Inventory{}, prefix(fmt.Errorf("line %d: a second document: an inventory is one document", extra.Line))
	} else if !errors.Is(err, io.EOF) {
		return Inventory{}, prefix(err)
	}
	inv, lines, err := f.inventory()
	if err != nil {
		return Inventory{}, prefix(err)
	}
	if err := inv.Validate(); err != nil {
		return Inventory{}, prefix(withLines(err, lines))
	}
	return inv, nil
}

// isJSON picks the format: by extension, else by the first byte.
func isJSON(name string, data []byte) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return true
	case ".yaml", ".yml":
		return false
	}
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}

// prefixErrors puts "name:" before each line of err's message, and turns
// yaml's "yaml: line N: msg" into "name:N: msg".
func prefixErrors(name string, err error) error {
	msgs := []string{err.Error()}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	var out []string
	for _, m := range msgs {
		for _, l := range strings.Split(m, "\n") {
			l = goTypes.Replace(strings.TrimPrefix(l, "yaml: "))
			if rest, ok := strings.CutPrefix(l, "line "); ok {
				if n, msg, ok := strings.Cut(rest, ": "); ok {
					out = append(out, fmt.Sprintf("%s:%s: %s", name, n, msg))
					continue
				}
			}
			out = append(out, name+": "+l)
		}
	}
	return errors.New(strings.Join(out, "\n"))
}

// goTypes names the file's Go types in yaml's messages the way the
// format does.
var goTypes = strings.NewReplacer(
	"[]enrich.lineString", "a list of strings", "enrich.lineString", "a string",
	"[]enrich.fileWorkload", "a list of workloads", "[]enrich.fileLB", "a list of load balancers",
	"[]enrich.fileGroup", "a list of load balancer groups", "[]enrich.fileNode", "a list of nodes",
	"map[string]string", "a mapping of strings", "[]string", "a list of strings", "uint32", "a number (0 to 4294967295)")

// entryLines are the lines of each section's entries.
type entryLines map[string][]int

// withLines puts the entry's line before each InventoryError.
func withLines(err error, lines entryLines) error {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
		var ie *InventoryError
		if errors.As(e, &ie) && ie.Index < len(lines[ie.Section]) {
			out[i] = fmt.Errorf("line %d: %w", lines[ie.Section][ie.Index], e)
		}
	}
	return errors.Join(out...)
}

// inventory converts the file's form into the model, parsing addresses.
func (f *fileInventory) inventory() (Inventory, entryLines, error) {
	var inv Inventory
	var errs []error
	bad := func(line int, format string, a ...any) {
		if len(errs) < MaxInventoryErrors {
			errs = append(errs, fmt.Errorf("line %d: "+format, append([]any{line}, a...)...))
		}
	}
	lines := entryLines{}
	for _, w := range f.Workloads {
		lines[SectionWorkloads] = append(lines[SectionWorkloads], w.line)
		mw := Workload{Name: w.Name, Namespace: w.Namespace, Node: w.Node, Kind: w.Kind, Labels: w.Labels}
		for _, ip := range w.IPs {
			p, err := parsePrefix(ip.s)
			if err != nil {
				bad(ip.line, "workload %q: %v", w.Name, err)
				continue
			}
			mw.Addrs = append(mw.Addrs, p)
		}
		inv.Workloads = append(inv.Workloads, mw)
	}
	for _, l := range f.LBs {
		lines[SectionLBs] = append(lines[SectionLBs], l.line)
		lb := services.LB{Name: l.Name, Options: services.Options{SkipSNAT: l.Options.SkipSNAT, ForceSNAT: l.Options.ForceSNAT,
			Reject: l.Options.Reject, HairpinSNATIP: l.Options.HairpinSNATIP.s, AffinityTimeout: l.Options.AffinityTimeout}}
		p, err := services.ParseProtocol(l.Protocol.s)
		if err != nil {
			bad(max(l.Protocol.line, l.line), "load balancer %q: protocol %q: want tcp, udp or sctp", l.Name, l.Protocol.s)
		}
		lb.Protocol = p
		for _, v := range l.VIPs {
			fe, err := parseEndpoint(v.frontend.s)
			if err != nil {
				bad(v.frontend.line, "load balancer %q: vip: %v", l.Name, err)
				continue
			}
			vip := services.VIP{Frontend: fe}
			for _, b := range v.backends {
				ap, err := parseEndpoint(b.s)
				if err != nil {
					bad(b.line, "load balancer %q: vip %s: backend: %v", l.Name, v.frontend.s, err)
					continue
				}
				vip.Backends = append(vip.Backends, ap)
			}
			lb.VIPs = append(lb.VIPs, vip)
		}
		inv.LBs = append(inv.LBs, lb)
	}
	for _, g := range f.Groups {
		lines[SectionGroups] = append(lines[SectionGroups], g.line)
		inv.Groups = append(inv.Groups, services.Group{Name: g.Name, LBs: g.LBs})
	}
	for _, n := range f.Nodes {
		lines[SectionNodes] = append(lines[SectionNodes], n.line)
		node := services.Node{Name: n.Name, Switch: n.Switch, Router: n.Router, Groups: n.Groups,
			SwitchGroups: n.SwitchGroups, RouterGroups: n.RouterGroups, LBs: n.LBs, SwitchLBs: n.SwitchLBs, RouterLBs: n.RouterLBs}
		for _, s := range n.Subnets {
			p, err := netip.ParsePrefix(s.s)
			if err != nil {
				bad(s.line, "node %q: subnet %q is not an address/prefix (10.244.1.1/24)", n.Name, s.s)
				continue
			}
			node.Subnets = append(node.Subnets, p)
		}
		inv.Nodes = append(inv.Nodes, node)
	}
	return inv, lines, errors.Join(errs...)
}

// parsePrefix parses a workload address: "10.0.0.5", "fd00::5" (one
// address) or "10.1.0.0/16" (a range).
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return p, fmt.Errorf("%q is not an address or prefix (10.0.0.5, fd00::5, 10.1.0.0/16)", s)
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an address or prefix (10.0.0.5, fd00::5, 10.1.0.0/16)", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// parseEndpoint parses "10.96.0.10:53", "[fd00::10]:53", or an address
// alone (port 0: every port).
func parseEndpoint(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 0), nil
	}
	return netip.AddrPort{}, fmt.Errorf("%q is not ADDRESS:PORT, [IPv6]:PORT or an address alone", s)
}
