package metrics

import (
	"runtime"
	"testing"
	"time"
)

// register returns a registry with the given collectors.
func register(t *testing.T, cs ...Collector) *Registry {
	t.Helper()
	r := NewRegistry()
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func TestGoCollector(t *testing.T) {
	r := register(t, NewGoCollector())
	const parked = 100
	release := make(chan struct{})
	for range parked {
		go func() { <-release }()
	}
	defer close(release)
	before := scrape(t, r)
	runtime.GC()
	runtime.GC()
	keep := make([]byte, 64<<20) // 64 MiB live on the heap during the scrape
	m := scrape(t, r)
	runtime.KeepAlive(keep)

	if g := m["go_goroutines"]; g < parked+1 || g > float64(runtime.NumGoroutine()+10) {
		t.Errorf("go_goroutines = %v, want at least %d (parked + this test) and about runtime.NumGoroutine() = %d", g, parked+1, runtime.NumGoroutine())
	}
	if d := m["go_gc_cycles_total"] - before["go_gc_cycles_total"]; d < 2 {
		t.Errorf("go_gc_cycles_total grew by %v across two runtime.GC(), want at least 2", d)
	}
	alloc, heap, sys := m["go_memstats_heap_alloc_bytes"], m["go_memstats_heap_sys_bytes"], m["go_memstats_sys_bytes"]
	if alloc < 64<<20 || alloc > heap || heap > sys {
		t.Errorf("heap_alloc %v ≥ 64 MiB, ≤ heap_sys %v ≤ sys %v does not hold", alloc, heap, sys)
	}
	if th := m["go_threads"]; th < 1 || th > 10000 {
		t.Errorf("go_threads = %v", th)
	}
	if v := m[`go_info{version="`+runtime.Version()+`"}`]; v != 1 {
		t.Errorf("go_info{version=%q} = %v, want 1; all: %v", runtime.Version(), v, m)
	}
	if n := len(m); n != 7+numReasons {
		t.Errorf("%d series, want %d: %v", n, 7+numReasons, m)
	}
}

func TestProcessCollectorCommon(t *testing.T) {
	r := register(t, NewProcessCollector())
	m := scrape(t, r)
	start := m["process_start_time_seconds"]
	now := float64(time.Now().UnixNano()) / 1e9
	if start > now+1 || start < now-3600 {
		t.Errorf("process_start_time_seconds = %v, want within the last hour before %v", start, now)
	}
	if e := m[errorsKey("collector_read")]; e != 0 {
		t.Errorf("collector_read errors = %v", e)
	}
}
