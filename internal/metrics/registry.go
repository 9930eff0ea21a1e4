package metrics

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"sync"
)

// Collector produces the samples of some metric families at scrape time.
type Collector interface {
	// Describe lists every family the collector writes. It is called once,
	// by Registry.Register, and must always return the same Descs.
	Describe() []*Desc
	// Collect writes the current values through w. It is called with the
	// registry's lock held, once per scrape: it must not call back into the
	// registry, and should read snapshots or atomics rather than block.
	Collect(w *Writer)
}

// Registry holds collectors and renders their metrics. Each family (metric
// name) belongs to exactly one registered collector: Register refuses a name
// that is already taken. Every registry also renders its own
// weir_metrics_errors_total. A Registry is safe for concurrent use; scrapes
// are serialised and reuse one set of buffers.
type Registry struct {
	mu    sync.Mutex
	cols  []registered
	w     Writer
	order []int  // w.fams indices sorted by family name
	out   []byte // the last rendering; reused across scrapes
}

// registered is a collector and the Descs it described at registration.
type registered struct {
	c     Collector
	descs []*Desc
}

// NewRegistry returns an empty registry (apart from its own error counter).
// The zero Registry is ready to use too.
func NewRegistry() *Registry {
	r := &Registry{}
	r.init()
	return r
}

// init sets up a zero Registry. Called with r.mu held (or before r is shared).
func (r *Registry) init() {
	if r.w.seen == nil {
		r.w.seen = make(map[uint64]struct{})
		r.rebuild()
	}
}

// Register adds c and the families it describes. It fails, registering
// nothing, if c is nil, already registered, not comparable (use a pointer),
// or describes an invalid Desc or a name already registered (by c itself,
// another collector, or the registry's own weir_metrics_errors_total).
func (r *Registry) Register(c Collector) error {
	if c == nil {
		return errors.New("metrics: Register(nil)")
	}
	if !reflect.TypeOf(c).Comparable() {
		return fmt.Errorf("metrics: collector of type %T is not comparable (register a pointer)", c)
	}
	descs := append([]*Desc(nil), c.Describe()...) // the collector keeps its slice
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	names := make(map[string]bool, len(r.w.fams)+len(descs))
	for _, e := range r.cols {
		if e.c == c {
			return fmt.Errorf("metrics: collector %T already registered", c)
		}
	}
	for i := range r.w.fams {
		names[r.w.fams[i].name] = true
	}
	for _, d := range descs {
		if err := d.validate(); err != nil {
			return fmt.Errorf("metrics: collector %T: %w", c, err)
		}
		if names[d.Name] {
			return fmt.Errorf("metrics: collector %T: metric %s is already registered", c, d.Name)
		}
		names[d.Name] = true
	}
	r.cols = append(r.cols, registered{c: c, descs: descs})
	r.rebuild()
	return nil
}

// Unregister removes c and its families. It does nothing if c is not
// registered.
func (r *Registry) Unregister(c Collector) {
	if c == nil || !reflect.TypeOf(c).Comparable() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	for i, e := range r.cols {
		if e.c == c {
			r.cols = append(r.cols[:i], r.cols[i+1:]...)
			r.rebuild()
			return
		}
	}
}

// rebuild recomputes the families, their index and their order from the
// registered collectors. Called with r.mu held (or before r is shared).
func (r *Registry) rebuild() {
	descs := []*Desc{errorsDesc}
	for _, e := range r.cols {
		descs = append(descs, e.descs...)
	}
	fams := make([]family, len(descs))
	index := make(map[*Desc]int, len(descs))
	for i, d := range descs {
		fams[i] = family{
			desc:   d,
			name:   d.Name,
			labels: append([]string(nil), d.Labels...),
			header: appendHeader(nil, d),
		}
		index[d] = i
	}
	order := make([]int, len(fams))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return fams[order[a]].name < fams[order[b]].name })
	r.w.fams, r.w.index, r.order = fams, index, order
}

// Descs returns every registered Desc, weir_metrics_errors_total included,
// sorted by name.
func (r *Registry) Descs() []*Desc {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	out := make([]*Desc, len(r.order))
	for i, fi := range r.order {
		out[i] = r.w.fams[fi].desc
	}
	return out
}

// WriteTo collects every registered collector and writes the text
// exposition (format 0.0.4) to w: families sorted by name, each with one
// # HELP and one # TYPE line followed by all its samples; families without
// samples are left out. After the first scrape, rendering the same series
// again allocates nothing.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.render()
	n, err := w.Write(r.out)
	return int64(n), err
}

// render collects and renders into r.out. Called with r.mu held.
func (r *Registry) render() {
	r.init()
	w := &r.w
	w.reset()
	for i := range r.cols {
		collect(w, r.cols[i].c)
	}
	for i, name := range reasonNames {
		w.Sample(errorsDesc, float64(w.errs[i]), name)
	}
	out := r.out[:0]
	for _, fi := range r.order {
		f := &w.fams[fi]
		if len(f.buf) == 0 {
			continue
		}
		out = append(out, f.header...)
		out = append(out, f.buf...)
	}
	r.out = out
}

// collect runs c.Collect, counting a panic instead of propagating it.
func collect(w *Writer, c Collector) {
	defer func() {
		if recover() != nil {
			w.errs[reasonCollectorPanic]++
		}
	}()
	c.Collect(w)
}
