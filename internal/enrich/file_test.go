package enrich

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/enrich/services"
	"github.com/weir-dev/weir/internal/flow"
)

func TestDecodeExample(t *testing.T) {
	inv, err := ReadInventoryFile("../../examples/inventory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Workloads) != 6 || len(inv.LBs) != 3 || len(inv.Groups) != 1 || len(inv.Nodes) != 2 {
		t.Fatalf("decoded %d workloads, %d LBs, %d groups, %d nodes", len(inv.Workloads), len(inv.LBs), len(inv.Groups), len(inv.Nodes))
	}
	w := inv.Workloads[0]
	want := Workload{Name: "web-0", Namespace: "shop", Node: "node-1", Kind: "pod", Labels: map[string]string{"app": "web"},
		Addrs: []netip.Prefix{pfx("10.244.1.5"), pfx("fd00:10:244:1::5")}}
	if !reflect.DeepEqual(w, want) {
		t.Errorf("workload 0:\n got %+v\nwant %+v", w, want)
	}
	web := inv.LBs[0]
	if web.Name != "shop/web" || web.Protocol != services.ProtoTCP || len(web.VIPs) != 2 ||
		web.VIPs[0].Frontend != ap("10.96.0.80:80") || web.VIPs[1].Backends[1] != ap("[fd00:10:244:2::7]:8080") ||
		web.Options.AffinityTimeout != 10800 {
		t.Errorf("load balancer 0: %+v", web)
	}
	dnsTCP := inv.LBs[2]
	if dnsTCP.Options != (services.Options{Reject: true, HairpinSNATIP: "169.254.169.5"}) || inv.LBs[1].Protocol != services.ProtoUDP {
		t.Errorf("load balancer options or protocol: %+v / %v", dnsTCP.Options, inv.LBs[1].Protocol)
	}
	n := inv.Nodes[1]
	if n.Switch != "ls-node-2" || n.Subnets[0] != pfx("10.244.2.1/24") || n.Groups[0] != "cluster-wide" {
		t.Errorf("node 1: %+v", n)
	}
	if _, err := NewIndex(&inv); err != nil {
		t.Error(err)
	}
}

// TestDecodeJSON: the JSON form decodes to what the YAML form does,
// whether told by the extension or by the first byte, with tabs, "\/"
// and surrogate pairs.
func TestDecodeJSON(t *testing.T) {
	yml := `
workloads:
  - {name: "a/b", namespace: "😀", ips: ["10.0.0.1", "10.1.0.0/16"], labels: {x: "\uFFFD"}}
load_balancers:
  - name: lb
    protocol: udp
    vips: {"10.96.0.1:53": ["10.0.0.1:53"], "10.96.0.2": []}
    options: {skip_snat: true, affinity_timeout: 5}
lb_groups: [{name: g, load_balancers: [lb]}]
nodes: [{name: n1, subnets: ["10.0.0.1/24"], groups: [g], router_load_balancers: [lb]}]
`
	js := "{\n\t\"workloads\": [{\"name\": \"a\\/b\", \"namespace\": \"\\ud83d\\ude00\", \"ips\": [\"10.0.0.1\", \"10.1.0.0/16\"], \"labels\": {\"x\": \"\\udc00\"}}],\n" +
		"\t\"load_balancers\": [{\"name\": \"lb\", \"protocol\": \"udp\", \"vips\": {\"10.96.0.1:53\": [\"10.0.0.1:53\"], \"10.96.0.2\": []},\n" +
		"\t\t\"options\": {\"skip_snat\": true, \"affinity_timeout\": 5}}],\n" +
		"\t\"lb_groups\": [{\"name\": \"g\", \"load_balancers\": [\"lb\"]}],\n" +
		"\t\"nodes\": [{\"name\": \"n1\", \"subnets\": [\"10.0.0.1/24\"], \"groups\": [\"g\"], \"router_load_balancers\": [\"lb\"]}]\n}\n"
	want, err := DecodeInventory("inv.yaml", []byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	if want.Workloads[0].Namespace != "😀" || want.LBs[0].VIPs[1].Frontend != ap("10.96.0.2") {
		t.Fatalf("YAML form: %+v", want)
	}
	for _, name := range []string{"inv.json", "inventory"} {
		got, err := DecodeInventory(name, []byte(js))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got, want)
		}
	}
	if _, err := DecodeInventory("inv.json", []byte("{\n\"workloads\": [}\n")); err == nil || !strings.HasPrefix(err.Error(), "inv.json:2: not valid JSON") {
		t.Errorf("bad JSON: %v", err)
	}
}

// TestDecodeErrors: each mistake is refused with its file and line.
func TestDecodeErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"workloads:\n  - name: a\n    ip: [10.0.0.1]\n", `inv.yaml:3: unknown field "ip" in a workload`},
		{"workload: []\n", `inv.yaml:1: unknown field "workload" in an inventory`},
		{"load_balancers:\n  - name: a\n    options: {snat: true}\n", `inv.yaml:3: unknown field "snat" in load balancer options`},
		{"workloads:\n  - name: a\n    ips: [10.0.0.1, 10.0.0.300]\n", `inv.yaml:3: workload "a": "10.0.0.300" is not an address`},
		{"workloads:\n  - name: a\n    ips:\n      - 10.0.0.1/24\n", `inv.yaml:2: workloads[0] "a": address 10.0.0.1/24 has host bits set (the network is 10.0.0.0/24)`},
		{"workloads:\n  - name: a\n  - name: a\n", `inv.yaml:3: workloads[1] "a": same namespace and name as workloads[0]`},
		{"workloads:\n  - namespace: x\n", `inv.yaml:2: workloads[0]: no name`},
		{"workloads:\n  - name: a\n    ips: 10.0.0.1\n", `inv.yaml:3: cannot unmarshal !!str ` + "`10.0.0.1`" + ` into a list of strings`},
		{"workloads:\n  - name: a\n    ips: [\"::ffff:10.0.0.1\"]\n", `write the IPv4 address 10.0.0.1 as such`},
		{"load_balancers:\n  - name: a\n    protocol: icmp\n", `inv.yaml:3: load balancer "a": protocol "icmp": want tcp, udp or sctp`},
		{"load_balancers:\n  - name: a\n    vips:\n      \"10.0.0.1:80\":\n        - \"10.0.0.300:80\"\n", `inv.yaml:5: load balancer "a": vip 10.0.0.1:80: backend: "10.0.0.300:80" is not`},
		{"load_balancers:\n  - name: a\n    vips:\n      \"10.0.0.1:80\": [\"[fd00::1]:80\"]\n", `inv.yaml:2: load_balancers[0] "a": vip 10.0.0.1:80: backend [fd00::1]:80 is IPv6, the VIP IPv4`},
		{"load_balancers:\n  - name: a\n    vips:\n      \"10.0.0.1:99999\": []\n", `inv.yaml:4: load balancer "a": vip: "10.0.0.1:99999" is not`},
		{"load_balancers:\n  - name: a\n    vips: [10.0.0.1]\n", `inv.yaml:3: vips: want a mapping`},
		{"load_balancers:\n  - name: a\n  - name: b\n  - name: a\n", `inv.yaml:4: load_balancers[2] "a": same name as load_balancers[0]`},
		{"load_balancers:\n  - name: a\n    vips: {\"10.0.0.1:80\": []}\n  - name: b\n    vips: {\"10.0.0.1:80\": []}\n", `inv.yaml:4: load_balancers[1] "b": vip 10.0.0.1:80/tcp is also a VIP of "a"`},
		{"load_balancers:\n  - name: a\n    vips: {\"10.0.0.1:80\": [\"10.1.1.1:80\", \"10.1.1.1:80\"]}\n", `backend 10.1.1.1:80 listed twice`},
		{"load_balancers:\n  - name: a\n    options: {hairpin_snat_ip: x}\n", `hairpin_snat_ip "x" is not an IP address`},
		{"load_balancers:\n  - name: a\n    options: {affinity_timeout: -1}\n", `inv.yaml:3: cannot unmarshal !!int ` + "`-1`" + ` into a number`},
		{"lb_groups:\n  - name: g\n    load_balancers: [nope]\n", `inv.yaml:2: lb_groups[0] "g": load_balancers: no load balancer named "nope"`},
		{"nodes:\n  - name: n\n    groups: [nope]\n", `inv.yaml:2: nodes[0] "n": groups: no group named "nope"`},
		{"nodes:\n  - name: n\n    switch_load_balancers: [nope]\n", `switch_load_balancers: no load balancer named "nope"`},
		{"nodes:\n  - name: n\n    subnets: [10.0.0.0]\n", `inv.yaml:3: node "n": subnet "10.0.0.0" is not an address/prefix`},
		{"nodes:\n  - &n {name: n}\n  - *n\n", `inv.yaml:3: aliases (*n) are not supported`},
		{"workloads: []\n---\nworkloads: []\n", `inv.yaml:2: a second document`},
		{"- a\n- b\n", `inv.yaml:1: want an inventory (a mapping), got a list`},
		{"workloads: [\n", `inv.yaml:1: did not find expected node content`},
		{"workloads:\n  - name: a\n    ips: [[10.0.0.1]]\n", `inv.yaml:3: want a string, got a list`},
	} {
		_, err := DecodeInventory("inv.yaml", []byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant …%s…", c.in, err, c.want)
		}
	}
}

func TestDecodeEmpty(t *testing.T) {
	for _, in := range []string{"", "\n# nothing\n", "{}", "workloads: []\n"} {
		inv, err := DecodeInventory("x.yaml", []byte(in))
		if err != nil || len(inv.Workloads)+len(inv.LBs)+len(inv.Groups)+len(inv.Nodes) != 0 {
			t.Errorf("%q: %+v, %v", in, inv, err)
		}
	}
}

func TestReadInventoryFileBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxInventoryBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := ReadInventoryFile(path); err == nil || !strings.Contains(err.Error(), "larger than 16 MiB: refused") {
		t.Errorf("a file over the bound: %v", err)
	}
	if _, err := ReadInventoryFile(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("a missing file: no error")
	}
}

// FuzzDecodeInventory: whatever the input, decoding returns an inventory
// or an error, never panics, and an inventory it returns is valid and
// indexes.
func FuzzDecodeInventory(f *testing.F) {
	ex, err := os.ReadFile("../../examples/inventory.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add("inv.yaml", ex)
	f.Add("inv.json", []byte(`{"workloads": [{"name": "a\/b", "ips": ["10.0.0.1", "fd00::/64"]}], "load_balancers": [{"name": "x", "vips": {"10.96.0.1:80": ["10.0.0.1:80"]}}]}`))
	f.Add("inv", []byte(" {\"nodes\": [{\"name\": \"\\ud83d\", \"groups\": []}]}"))
	f.Add("inv.yaml", []byte("workloads:\n  - &w {name: a}\n  - *w\n"))
	f.Add("inv.yaml", []byte("load_balancers:\n  - name: a\n    vips: {\"[fd00::1]:80\": [\"10.0.0.1:80\"]}\n"))
	f.Add("inv.yaml", []byte("a: &a [*a]\n"))
	f.Add("inv.yml", []byte("workloads: [{name: a, ips: [\"10.0.0.0/8\", \"10.0.0.0/8\"]}, {name: b, ips: [\"10.0.0.0/8\"]}]\n"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		inv, err := DecodeInventory(name, data)
		if err != nil {
			return
		}
		if err := inv.Validate(); err != nil {
			t.Fatalf("decoded an invalid inventory: %v", err)
		}
		x, err := NewIndex(&inv)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []flow.Record{rec(6, "10.0.0.1", 1, "10.96.0.1", 80), rec(17, "fd00::1", 1, "fd00::2", 53),
			natted(rec(6, "10.0.0.1", 1, "10.96.0.1", 80), "10.0.0.2:80")} {
			x.Enrich(&r)
		}
	})
}
