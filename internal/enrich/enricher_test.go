package enrich

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/metrics"
)

// batch returns one record of each kind: VIP, NAT, backend, ambiguous,
// and nothing known.
func batch() []flow.Record {
	return []flow.Record{
		rec(6, "10.244.1.10", 40000, "10.96.0.80", 80),
		natted(rec(6, "10.244.1.10", 40000, "10.96.0.80", 80), "10.244.2.7:8080"),
		rec(6, "10.244.1.10", 40000, "10.244.2.9", 5432),
		rec(6, "10.244.1.10", 40000, "10.244.1.5", 8080),
		rec(17, "8.8.8.8", 1, "9.9.9.9", 53),
	}
}

func TestEnricherLoad(t *testing.T) {
	e := NewEnricher()
	recs := batch()
	e.Enrich(recs)
	if recs[0].SrcWorkload != nil || recs[0].Service != nil {
		t.Fatal("an empty enricher enriched")
	}
	if err := e.Load(*testInventory()); err != nil {
		t.Fatal(err)
	}
	bad := *testInventory()
	bad.Groups = append(bad.Groups, bad.Groups[0])
	err := e.Load(bad)
	var ie *InventoryError
	if err == nil || !strings.Contains(err.Error(), `lb_groups[2] "cluster": same name as lb_groups[0]`) {
		t.Fatalf("a duplicate group: %v", err)
	}
	if !errorsAs(err, &ie) || ie.Section != SectionGroups || ie.Index != 2 {
		t.Errorf("the error is not an InventoryError of lb_groups[2]: %#v", err)
	}
	recs = batch()
	e.Enrich(recs)
	if recs[0].SrcWorkload == nil || recs[0].ServiceMatch != flow.ServiceMatchVIP {
		t.Fatal("the refused inventory replaced the loaded one")
	}
	st := e.Stats()
	want := Stats{Records: 10, SrcHits: 4, DstHits: 3, ServiceHits: [numMatches]uint64{6, 1, 1, 1, 1},
		Reloads: 1, ReloadErrors: 1, Workloads: 7, Services: 5, VIPs: 6}
	if st != want {
		t.Errorf("stats\n got %+v\nwant %+v", st, want)
	}
}

// TestEnricherConcurrent: loads swap the index while workers enrich (run
// with -race).
func TestEnricherConcurrent(t *testing.T) {
	e := NewEnricher()
	other := &Inventory{Workloads: []Workload{wl("x", "", "", "10.244.1.10")}}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				recs := batch()
				e.Enrich(recs)
				if w := recs[0].SrcWorkload; w != nil && w.Name != "client" && w.Name != "x" {
					t.Errorf("workload %q", w.Name)
				}
			}
		}()
	}
	for i := range 50 {
		inv := testInventory()
		if i%2 == 1 {
			inv = other
		}
		if err := e.Load(*inv); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}

type captureSink struct {
	got    []flow.Record
	closed bool
}

func (c *captureSink) Write(recs []flow.Record) error { c.got = append(c.got, recs...); return nil }
func (c *captureSink) Close() error                   { c.closed = true; return nil }

func TestSink(t *testing.T) {
	e := NewEnricher()
	if err := e.Load(*testInventory()); err != nil {
		t.Fatal(err)
	}
	next := &captureSink{}
	s := NewSink(e, next)
	if err := s.Write(batch()); err != nil {
		t.Fatal(err)
	}
	if len(next.got) != 5 || next.got[1].ServiceMatch != flow.ServiceMatchNAT || next.got[1].DstWorkload == nil || next.got[1].DstWorkload.Name != "web-1" {
		t.Errorf("the next sink got %+v", next.got)
	}
	if err := s.Close(); err != nil || !next.closed {
		t.Error("Close did not close the next sink")
	}
}

func TestCollector(t *testing.T) {
	e := NewEnricher()
	if err := e.Load(*testInventory()); err != nil {
		t.Fatal(err)
	}
	e.Enrich(batch())
	e.CountError()
	reg := metrics.NewRegistry()
	if err := reg.Register(e.Collector()); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := reg.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"weir_enrich_records_total 5", "weir_enrich_src_hits_total 4", "weir_enrich_dst_hits_total 3",
		`weir_enrich_service_hits_total{match="vip"} 1`, `weir_enrich_service_hits_total{match="nat"} 1`,
		`weir_enrich_service_hits_total{match="backend"} 1`, `weir_enrich_service_hits_total{match="ambiguous"} 1`,
		"weir_enrich_reloads_total 1", "weir_enrich_reload_errors_total 1",
		"weir_enrich_workloads 7", "weir_enrich_services 5", "weir_enrich_vips 6",
	} {
		if !strings.Contains(b.String(), "\n"+line+"\n") {
			t.Errorf("no %q in\n%s", line, b.String())
		}
	}
}

// TestMetricsDocumented: every weir_enrich_* metric is in docs/metrics.md
// with its type, and the page documents no other weir_enrich_* metric.
func TestMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(weir_enrich_[a-z_]+)` \\| (counter|gauge|histogram) \\|").FindAllStringSubmatch(string(doc), -1) {
		rows[m[1]] = m[2]
	}
	for _, d := range NewEnricher().Collector().Describe() {
		typ := d.Type.String()
		if got, ok := rows[d.Name]; !ok {
			t.Errorf("%s (%s) is not documented in docs/metrics.md", d.Name, typ)
		} else if got != typ {
			t.Errorf("docs/metrics.md says %s is a %s; it is a %s", d.Name, got, typ)
		}
		delete(rows, d.Name)
	}
	for name := range rows {
		t.Errorf("docs/metrics.md documents %s, which the enricher does not register", name)
	}
}

// TestWatch: the file is loaded, a change takes effect, garbage and a
// missing file are counted and keep the previous inventory, and a fixed
// file is loaded again.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "inv.yaml")
	write := func(s string) {
		t.Helper()
		tmp := filepath.Join(dir, "tmp")
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil { // as editors and ConfigMap volumes do
			t.Fatal(err)
		}
	}
	owner := func(e *Enricher) string {
		r := rec(6, "10.0.0.5", 1, "10.0.0.6", 2)
		e.Index().Enrich(&r)
		return wname(r.SrcWorkload)
	}
	write("workloads: [{name: a, ips: [10.0.0.5]}]\n")
	e := NewEnricher()
	var logs []string
	var mu sync.Mutex
	logf := func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, f)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := Watch(ctx, e, path, 10*time.Millisecond, logf); err != nil {
		t.Fatal(err)
	}
	if got := owner(e); got != "/a@" {
		t.Fatalf("first load: %s", got)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 5s; stats %+v", what, e.Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	write("workloads: [{name: b, ips: [10.0.0.5]}]\n")
	waitFor("the change loaded", func() bool { return owner(e) == "/b@" })
	write("workloads: [{name: c, ips: [10.0.0.500]}]\n")
	waitFor("the bad file counted", func() bool { return e.Stats().ReloadErrors == 1 })
	os.Remove(path)
	waitFor("the missing file counted", func() bool { return e.Stats().ReloadErrors == 2 })
	time.Sleep(50 * time.Millisecond) // several polls: each problem counts once
	if st := e.Stats(); st.ReloadErrors != 2 || st.Reloads != 2 || owner(e) != "/b@" {
		t.Fatalf("after a bad and a missing file: %+v, owner %s", st, owner(e))
	}
	write("workloads: [{name: d, ips: [10.0.0.5]}]\n")
	waitFor("the fixed file loaded", func() bool { return owner(e) == "/d@" })
	if st := e.Stats(); st.Reloads != 3 {
		t.Errorf("reloads %d, want 3", st.Reloads)
	}
	mu.Lock()
	n := len(logs)
	mu.Unlock()
	if n < 4 {
		t.Errorf("%d log lines, want one per reload and per problem", n)
	}
}

func TestWatchFirstLoadFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inv.yaml")
	os.WriteFile(path, []byte("workloads: [{ips: [10.0.0.1]}]\n"), 0o644)
	e := NewEnricher()
	err := Watch(context.Background(), e, path, time.Hour, nil)
	if err == nil || !strings.Contains(err.Error(), "inv.yaml:1: workloads[0]: no name") {
		t.Errorf("first load of a bad file: %v", err)
	}
	if st := e.Stats(); st.ReloadErrors != 1 || st.Reloads != 0 {
		t.Errorf("stats %+v", st)
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
