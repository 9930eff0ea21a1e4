package query

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
)

// enrichRecs are natRecs with workloads and services:
//
//	#  src workload (ns, node)  dst workload       service (backends, group)   match      pkts
//	0  web-1 (shop, n1)         -                  shop/cart (b1, g1)          nat        1
//	1  web-2 (shop, n2)         -                  shop/cart (b1, g1)          nat        2
//	2  web-1 (shop, n1)         -                  shop/cart (b1, g1)          nat        4
//	3  vm-a (no namespace)      cart-0 (shop, n1)  shop/cart (b1, g1)          backend    8
//	4  -                        cart-0 (shop, n1)  -                           none       16
//	5  web-2 (shop, n2)         -                  a/x,b/y                     ambiguous  32
//	6  -                        -                  -                           none       64
//	7-11 (eth1) none                                                                      1 each
func enrichRecs() []flow.Record {
	web1 := &flow.Workload{Name: "web-1", Namespace: "shop", Node: "n1"}
	web2 := &flow.Workload{Name: "web-2", Namespace: "shop", Node: "n2"}
	cart := &flow.Workload{Name: "cart-0", Namespace: "shop", Node: "n1"}
	vm := &flow.Workload{Name: "vm-a"}
	svc := &flow.Service{Name: "shop/cart", Backends: "b1", Group: "g1"}
	amb := &flow.Service{Name: "a/x,b/y"}
	recs := natRecs()
	set := func(i int, src, dst *flow.Workload, s *flow.Service, m flow.ServiceMatch) {
		recs[i].SrcWorkload, recs[i].DstWorkload, recs[i].Service, recs[i].ServiceMatch = src, dst, s, m
	}
	set(0, web1, nil, svc, flow.ServiceMatchNAT)
	set(1, web2, nil, svc, flow.ServiceMatchNAT)
	set(2, web1, nil, svc, flow.ServiceMatchNAT)
	set(3, vm, cart, svc, flow.ServiceMatchBackend)
	set(4, nil, cart, nil, flow.ServiceMatchNone)
	set(5, web2, nil, amb, flow.ServiceMatchAmbiguous)
	return recs
}

// TestEnrichQuery: records with workloads and services, from the store
// and live, group and filter by every enrichment attribute; records
// without them have "" (and service_match none).
func TestEnrichQuery(t *testing.T) {
	recs := enrichRecs()
	s := writeStore(t, recs, 4)
	for _, c := range []struct {
		group, cond string
		want        []string
	}{
		{"src_workload", "", []string{" 85", "web-2 34", "vm-a 8", "web-1 5"}},
		{"src_namespace,src_node", "iface eth0", []string{"| 88", "shop|n2 34", "shop|n1 5"}},
		{"dst_workload,dst_namespace,dst_node", "", []string{"|| 108", "cart-0|shop|n1 24"}},
		{"service,service_match", "", []string{"| 85", "a/x,b/y|ambiguous 32", "shop/cart|backend 8", "shop/cart|nat 7"}},
		{"service_backends,service_group", `service != ""`, []string{"| 32", "b1|g1 15"}},
		{"sip", "src_workload = web-1", []string{"10.0.0.3 4", "10.0.0.1 1"}},
		{"sip", "src_namespace = shop and src_node != n1", []string{"2001:db8::2 32", "10.0.0.2 2"}},
		{"sip", `dst_workload = cart-0 and service = ""`, []string{"10.0.0.4 16"}},
		{"sip", "service_match = nat and not src_workload = web-2", []string{"10.0.0.3 4", "10.0.0.1 1"}},
		{"sip", "service_match = ambiguous or service_group = g1 and dst_node = n1", []string{"2001:db8::2 32", "2001:db8::1 8"}},
		{"sip", `service_match = none and iface eth0 and src_workload = ""`, []string{"10.0.0.5 64", "10.0.0.4 16"}},
		{"sip", `service = "a/x,b/y"`, []string{"2001:db8::2 32"}},
		{"sip", "service_backends = b1 and src_workload != vm-a", []string{"10.0.0.3 4", "10.0.0.2 2", "10.0.0.1 1"}},
	} {
		want := strings.Join(c.want, ", ")
		for _, workers := range []int{1, 3} {
			res := natQuery(t, s, c.group, c.cond, workers, nil)
			if got := cells(res); strings.Join(got, ", ") != want {
				t.Errorf("%s where %q (%d workers):\n got %q\nwant %q", c.group, c.cond, workers, got, c.want)
			}
		}
		res := natQuery(t, nil, c.group, c.cond, 1, recs)
		if got := cells(res); strings.Join(got, ", ") != want {
			t.Errorf("live: %s where %q:\n got %q\nwant %q", c.group, c.cond, got, c.want)
		}
	}
}

// TestEnrichQueryErrors: the string attributes and service_match compare
// only with = and !=, and service_match takes only its names.
func TestEnrichQueryErrors(t *testing.T) {
	for _, bad := range []string{"src_workload < a", "service_match > vip", "service_match = maybe", "service_group >= x"} {
		if _, err := ParseCondition(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	c, err := ParseCondition(`service_match = VIP and dst_namespace = "kube system"`)
	if err != nil || c.String() != `service_match = vip and dst_namespace = "kube system"` {
		t.Errorf("%v %v", c, err)
	}
}

// TestEnrichOutputAndLive: weir's JSON records carry the enrichment into
// a live query (one shared workload per distinct one); the query's JSON
// output names the attributes as the records do.
func TestEnrichOutputAndLive(t *testing.T) {
	var in []byte
	for _, r := range enrichRecs()[:7] {
		in = append(format.AppendJSON(in, &r), '\n')
	}
	recs, err := ReadRecords(bytes.NewReader(in), 100)
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].SrcWorkload != recs[2].SrcWorkload || *recs[0].SrcWorkload != (flow.Workload{Name: "web-1", Namespace: "shop", Node: "n1"}) ||
		recs[3].Service != recs[0].Service || recs[3].ServiceMatch != flow.ServiceMatchBackend || recs[6].SrcWorkload != nil || recs[4].Service != nil {
		t.Errorf("live records: %+v", recs[:4])
	}
	res := natQuery(t, nil, "src_workload,service,service_match", "", 1, recs)
	var js bytes.Buffer
	if err := res.Write(&js, JSON); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if r := doc.Rows[0]; r["src_workload"] != "" || r["service"] != "" || r["service_match"] != "" {
		t.Errorf("json row of records without enrichment: %v", r)
	}
	if r := doc.Rows[1]; r["src_workload"] != "web-2" || r["service"] != "a/x,b/y" || r["service_match"] != "ambiguous" {
		t.Errorf("json row: %v", r)
	}
	if _, err := ReadRecords(strings.NewReader(`{"src_ip":"10.0.0.1","dst_ip":"10.0.0.2","service_match":"maybe"}`), 1); err == nil {
		t.Error("bad service_match: no error")
	}
}
