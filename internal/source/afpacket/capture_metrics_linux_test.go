//go:build linux

package afpacket

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/api"
	"github.com/weir-dev/weir/internal/enrich"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/httpauth"
	"github.com/weir-dev/weir/internal/ingest"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/netdev"
	"github.com/weir-dev/weir/internal/sink"
	ipfixsink "github.com/weir-dev/weir/internal/sink/ipfix"
	"github.com/weir-dev/weir/internal/sink/kafka"
	"github.com/weir-dev/weir/internal/source/conntrack"
	"github.com/weir-dev/weir/internal/source/ebpf"
	"github.com/weir-dev/weir/internal/source/ipfixrecv"
	"github.com/weir-dev/weir/internal/source/nflog"
	"github.com/weir-dev/weir/internal/store"
)

// TestMetricsDocumented: every metric weir capture, collect, serve and ingest register is in
// docs/metrics.md with its type, and the page lists nothing else.
func TestMetricsDocumented(t *testing.T) {
	sel, err := netdev.ParseSelector([]string{"any"})
	if err != nil {
		t.Fatal(err)
	}
	q := sink.NewQueue("stdout", &collect{}, 1, 1)
	defer q.Close()
	c, err := New(Config{Select: sel, Table: flow.Config{MaxFlows: 16}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	x, err := ipfixsink.New(ipfixsink.Config{URL: "ipfix+udp://127.0.0.1:4739"}) // sends nothing: no records
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	coll, err := ipfixrecv.New(ipfixrecv.Config{Listen: []string{"udp://127.0.0.1:0"}, Sockets: 1})
	if err != nil {
		t.Fatal(err)
	}
	reg := metrics.NewRegistry()
	ebpfCol := new(ebpf.Source).Collector() // weir capture --source ebpf
	ct := new(conntrack.Source).Collector() // Describe needs no open source
	nl := new(nflog.Source).Collector()
	for _, col := range []metrics.Collector{metrics.NewGoCollector(), metrics.NewProcessCollector(), c.Collector(), sink.QueueCollector(q), st.Collector(), ipfixsink.Collector(x), coll.Collector(), ebpfCol, ct, nl, enrich.NewEnricher().Collector()} {
		if err := reg.Register(col); err != nil {
			t.Fatal(err)
		}
	}
	apiSrv, err := api.New(api.Config{Backend: api.NewStoreBackend(st, nil), NoConsole: true}) // weir serve
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []metrics.Collector{apiSrv.Collector(), httpauth.Middleware(nil, nil, nil).Collector(), kafka.Collector(), new(ingest.Ingest).Collector()} { // weir ingest: Describe needs no consumer
		if err := reg.Register(col); err != nil {
			t.Fatal(err)
		}
	}
	doc, err := os.ReadFile("../../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // name → type, from "| `name` | type |" rows
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_:]+)` \\| (counter|gauge|histogram) \\|").FindAllStringSubmatch(string(doc), -1) {
		rows[m[1]] = m[2]
	}
	for _, d := range reg.Descs() {
		typ := map[metrics.Type]string{metrics.Counter: "counter", metrics.Gauge: "gauge", metrics.Histogram: "histogram"}[d.Type]
		got, ok := rows[d.Name]
		switch {
		case !ok:
			t.Errorf("%s (%s) is not documented in docs/metrics.md", d.Name, typ)
		case got != typ:
			t.Errorf("docs/metrics.md says %s is a %s; it is a %s", d.Name, got, typ)
		}
		delete(rows, d.Name)
	}
	for name := range rows {
		if strings.HasPrefix(name, "weir_") || strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			t.Errorf("docs/metrics.md documents %s, which weir does not register", name)
		}
	}
}
