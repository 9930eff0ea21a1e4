package metrics

import (
	"runtime"
	rtmetrics "runtime/metrics"
	"sync"
)

// Go runtime metric descriptions.
var (
	goGoroutines = &Desc{Name: "go_goroutines", Help: "Goroutines that currently exist.", Type: Gauge}
	goThreads    = &Desc{Name: "go_threads", Help: "Operating system threads the Go runtime currently has.", Type: Gauge}
	goGCCycles   = &Desc{Name: "go_gc_cycles_total", Help: "Completed garbage collection cycles.", Type: Counter}
	goHeapAlloc  = &Desc{Name: "go_memstats_heap_alloc_bytes", Help: "Bytes of allocated heap objects, reachable or not yet swept.", Type: Gauge}
	goHeapSys    = &Desc{Name: "go_memstats_heap_sys_bytes", Help: "Bytes of heap memory obtained from the operating system.", Type: Gauge}
	goSys        = &Desc{Name: "go_memstats_sys_bytes", Help: "Bytes of memory obtained from the operating system by the Go runtime.", Type: Gauge}
	goInfo       = &Desc{Name: "go_info", Help: "Always 1; the version label is the Go version weir was built with.", Type: Gauge, Labels: []string{"version"}}
)

// runtime/metrics names read by the Go collector, in goSamples order.
var goMetricNames = [...]string{
	"/sched/goroutines:goroutines",
	"/sched/threads/total:threads",
	"/gc/cycles/total:gc-cycles",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/total:bytes",
}

const (
	gmGoroutines = iota
	gmThreads
	gmGCCycles
	gmHeapObjects
	gmHeapUnused
	gmHeapFree
	gmHeapReleased
	gmTotal
)

// goCollector reads the Go runtime's metrics through runtime/metrics, which
// does not stop the world (unlike runtime.ReadMemStats).
type goCollector struct {
	mu      sync.Mutex // guards samples when the collector is in several registries
	samples [len(goMetricNames)]rtmetrics.Sample
	version string
}

// NewGoCollector returns a collector of Go runtime metrics: go_goroutines,
// go_threads, go_gc_cycles_total, go_memstats_heap_alloc_bytes,
// go_memstats_heap_sys_bytes, go_memstats_sys_bytes and go_info{version}.
// Collecting allocates nothing.
func NewGoCollector() Collector {
	c := &goCollector{version: runtime.Version()}
	for i, n := range goMetricNames {
		c.samples[i].Name = n
	}
	return c
}

// Describe lists the Go runtime families.
func (c *goCollector) Describe() []*Desc {
	return []*Desc{goGoroutines, goThreads, goGCCycles, goHeapAlloc, goHeapSys, goSys, goInfo}
}

// Collect reads the runtime's metrics and writes them.
func (c *goCollector) Collect(w *Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.samples[:]
	rtmetrics.Read(s)
	val := func(i int) (float64, bool) { // a metric this Go version lacks has KindBad: left out
		if s[i].Value.Kind() != rtmetrics.KindUint64 {
			return 0, false
		}
		return float64(s[i].Value.Uint64()), true
	}
	for _, m := range [...]struct {
		d *Desc
		i int
	}{{goGoroutines, gmGoroutines}, {goThreads, gmThreads}, {goGCCycles, gmGCCycles}, {goHeapAlloc, gmHeapObjects}, {goSys, gmTotal}} {
		if v, ok := val(m.i); ok {
			w.Sample(m.d, v)
		}
	}
	var heapSys float64 // what MemStats.HeapSys sums
	for _, i := range [...]int{gmHeapObjects, gmHeapUnused, gmHeapFree, gmHeapReleased} {
		v, ok := val(i)
		if !ok {
			heapSys = -1
			break
		}
		heapSys += v
	}
	if heapSys >= 0 {
		w.Sample(goHeapSys, heapSys)
	}
	w.Sample(goInfo, 1, c.version)
}
