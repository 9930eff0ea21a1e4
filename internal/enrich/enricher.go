package enrich

import (
	"sync"
	"sync/atomic"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/sink"
)

// Enricher enriches records through the current Index, which Load
// replaces atomically: Enrich takes no lock, and records enriched while a
// load happens see the old index or the new one, never a mix. It is safe
// for concurrent use (capture workers share one).
type Enricher struct {
	idx    atomic.Pointer[Index]
	loadMu sync.Mutex // serializes Load

	records, srcHits, dstHits atomic.Uint64
	svcHits                   [numMatches]atomic.Uint64
	reloads, reloadErrors     atomic.Uint64
}

const numMatches = int(flow.ServiceMatchAmbiguous) + 1

// Stats are an Enricher's counters.
type Stats struct {
	Records uint64 // records enriched
	SrcHits uint64 // records whose source is a known workload
	DstHits uint64 // records whose destination is a known workload
	// ServiceHits counts records by ServiceMatch (index 0,
	// ServiceMatchNone, is records with no service).
	ServiceHits  [numMatches]uint64
	Reloads      uint64 // inventories loaded (the first included)
	ReloadErrors uint64 // inventories refused (the previous one was kept)
	Workloads    int    // workloads in the current index
	Services     int    // load balancers in the current index
	VIPs         int    // VIPs in the current index
}

// NewEnricher returns an Enricher with an empty index: records pass
// through with no workload and no service until Load.
func NewEnricher() *Enricher {
	e := &Enricher{}
	e.idx.Store(EmptyIndex())
	return e
}

// Load validates inv, builds its index and makes it the current one. A
// bad inventory returns the problems (see Inventory.Validate), is counted
// as a reload error and leaves the current index in place.
func (e *Enricher) Load(inv Inventory) error {
	e.loadMu.Lock()
	defer e.loadMu.Unlock()
	x, err := NewIndex(&inv)
	if err != nil {
		e.reloadErrors.Add(1)
		return err
	}
	e.idx.Store(x)
	e.reloads.Add(1)
	return nil
}

// CountError counts a reload that failed before Load was reached (an
// unreadable or malformed inventory file).
func (e *Enricher) CountError() { e.reloadErrors.Add(1) }

// Index returns the current index.
func (e *Enricher) Index() *Index { return e.idx.Load() }

// Enrich enriches recs in place through the current index (see
// Index.Enrich). It allocates nothing.
func (e *Enricher) Enrich(recs []flow.Record) {
	if len(recs) == 0 {
		return
	}
	x := e.idx.Load()
	var src, dst uint64
	var svc [numMatches]uint64
	for i := range recs {
		r := &recs[i]
		x.Enrich(r)
		if r.SrcWorkload != nil {
			src++
		}
		if r.DstWorkload != nil {
			dst++
		}
		if int(r.ServiceMatch) < numMatches {
			svc[r.ServiceMatch]++
		}
	}
	e.records.Add(uint64(len(recs)))
	e.srcHits.Add(src)
	e.dstHits.Add(dst)
	for m := 1; m < numMatches; m++ {
		if svc[m] != 0 {
			e.svcHits[m].Add(svc[m])
		}
	}
}

// Stats returns the counters.
func (e *Enricher) Stats() Stats {
	x := e.idx.Load()
	st := Stats{Records: e.records.Load(), SrcHits: e.srcHits.Load(), DstHits: e.dstHits.Load(),
		Reloads: e.reloads.Load(), ReloadErrors: e.reloadErrors.Load(),
		Workloads: x.Workloads(), Services: x.Services(), VIPs: x.VIPs()}
	var hits uint64
	for m := 1; m < numMatches; m++ {
		st.ServiceHits[m] = e.svcHits[m].Load()
		hits += st.ServiceHits[m]
	}
	st.ServiceHits[0] = st.Records - min(hits, st.Records)
	return st
}

// Sink enriches each batch in place, then hands it to the next sink. Put
// it before the fan-out, so that every sink sees enriched records.
type Sink struct {
	e    *Enricher
	next sink.Sink
}

// NewSink returns a Sink enriching through e into next.
func NewSink(e *Enricher, next sink.Sink) *Sink { return &Sink{e: e, next: next} }

// Write enriches recs and writes them to the next sink.
func (s *Sink) Write(recs []flow.Record) error {
	s.e.Enrich(recs)
	return s.next.Write(recs)
}

// Close closes the next sink.
func (s *Sink) Close() error { return s.next.Close() }

// Metric descriptions; docs/metrics.md documents each (TestMetricsDocumented
// in this package checks).
var (
	mRecords      = counter("weir_enrich_records_total", "Records passed through enrichment.")
	mSrcHits      = counter("weir_enrich_src_hits_total", "Records whose source address belongs to a known workload.")
	mDstHits      = counter("weir_enrich_dst_hits_total", "Records whose destination address belongs to a known workload.")
	mServiceHits  = counter("weir_enrich_service_hits_total", "Records tied to a service, by how (vip, nat, backend, ambiguous).", "match")
	mReloads      = counter("weir_enrich_reloads_total", "Inventories loaded, the first included.")
	mReloadErrors = counter("weir_enrich_reload_errors_total", "Inventories refused (unreadable, malformed or invalid); the previous one stays in use.")
	mWorkloads    = gauge("weir_enrich_workloads", "Workloads in the current inventory.")
	mServices     = gauge("weir_enrich_services", "Load balancers (services) in the current inventory.")
	mVIPs         = gauge("weir_enrich_vips", "Service VIPs in the current inventory.")
)

func counter(name, help string, labels ...string) *metrics.Desc {
	return &metrics.Desc{Name: name, Help: help, Type: metrics.Counter, Labels: labels}
}

func gauge(name, help string, labels ...string) *metrics.Desc {
	return &metrics.Desc{Name: name, Help: help, Type: metrics.Gauge, Labels: labels}
}

// Collector returns a metrics.Collector of e's counters (weir_enrich_*).
func (e *Enricher) Collector() metrics.Collector { return collector{e} }

type collector struct{ e *Enricher }

// Describe lists every metric the collector emits.
func (c collector) Describe() []*metrics.Desc {
	return []*metrics.Desc{mRecords, mSrcHits, mDstHits, mServiceHits, mReloads, mReloadErrors, mWorkloads, mServices, mVIPs}
}

// Collect writes the current values.
func (c collector) Collect(w *metrics.Writer) {
	st := c.e.Stats()
	w.Sample(mRecords, float64(st.Records))
	w.Sample(mSrcHits, float64(st.SrcHits))
	w.Sample(mDstHits, float64(st.DstHits))
	for m := 1; m < numMatches; m++ {
		w.Sample(mServiceHits, float64(st.ServiceHits[m]), flow.ServiceMatch(m).String())
	}
	w.Sample(mReloads, float64(st.Reloads))
	w.Sample(mReloadErrors, float64(st.ReloadErrors))
	w.Sample(mWorkloads, float64(st.Workloads))
	w.Sample(mServices, float64(st.Services))
	w.Sample(mVIPs, float64(st.VIPs))
}
