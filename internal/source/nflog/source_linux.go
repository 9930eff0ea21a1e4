//go:build linux

package nflog

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/sink"
)

// Source reads NFLOG groups into deny-flow records: one socket and one
// goroutine per group, each aggregating into its own bounded table.
type Source struct {
	cfg    SourceConfig
	groups []*reader
	emitMu sync.Mutex // serialises emit across groups
	emit   func([]flow.Record) error
}

// reader is one group's socket and aggregation; its goroutine owns it.
type reader struct {
	src    *Source
	sock   *Socket
	agg    *Aggregator
	recs   []flow.Record
	ifaces map[uint32]string // interface index → name, forgotten every minute
	ifAge  time.Time

	mu    sync.Mutex
	stats GroupStats
}

// New binds every group (in cfg.Netns if set) and returns a Source whose
// Run hands record batches to a sink (never concurrently).
func New(cfg SourceConfig) (*Source, error) {
	cfg = cfg.withDefaults()
	s := &Source{cfg: cfg}
	for _, g := range cfg.Groups {
		sc := cfg.Socket
		sc.Netns, sc.Group = cfg.Netns, g
		sock, err := Open(sc)
		if err != nil {
			s.Close()
			return nil, err
		}
		r := &reader{src: s, sock: sock, recs: make([]flow.Record, 0, cfg.Batch), ifaces: map[uint32]string{}}
		r.agg = NewAggregator(AggregatorConfig{MaxFlows: cfg.MaxFlows, IdleTimeout: int64(cfg.IdleTimeout)}, r.collect)
		r.agg.Table.SetActive(int64(cfg.ActiveTimeout))
		r.stats.Group = g
		s.groups = append(s.groups, r)
	}
	return s, nil
}

// Close closes the sockets. Call it after Run returned.
func (s *Source) Close() error {
	var errs []error
	for _, r := range s.groups {
		errs = append(errs, r.sock.Close())
	}
	return errors.Join(errs...)
}

// Stats returns each group's counters as of its last read.
func (s *Source) Stats() []GroupStats {
	out := make([]GroupStats, len(s.groups))
	for i, r := range s.groups {
		r.mu.Lock()
		out[i] = r.stats
		r.mu.Unlock()
	}
	return out
}

// Run reads every group until ctx is done, writing deny-flow records to
// out, then exports every deny flow (reason shutdown). It returns the
// first error that stopped a group.
func (s *Source) Run(ctx context.Context, out sink.Sink) error {
	s.emit = out.Write
	groups := make([]string, len(s.cfg.Groups))
	for i, g := range s.cfg.Groups {
		groups[i] = strconv.Itoa(int(g))
	}
	s.cfg.Logf("reading the NFLOG groups %s of %s", strings.Join(groups, ","), s.cfg.Where)
	errs := make(chan error, len(s.groups))
	for _, r := range s.groups {
		go func() { errs <- r.run(ctx) }()
	}
	var first error
	for range s.groups {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (r *reader) run(ctx context.Context) error {
	defer r.publish()
	var lost uint64
	for ctx.Err() == nil {
		err := r.sock.Read(func(msg []byte) error {
			_ = r.agg.Message(msg, time.Now().UnixNano()) // rejected messages are counted
			return nil
		})
		switch {
		case err == nil, errors.Is(err, ErrTimeout):
		case errors.Is(err, ErrOverrun):
			if lost++; lost == 1 || lost%1000 == 0 {
				r.src.cfg.Logf("nflog group %d: the kernel dropped log messages (%d overruns); raise the receive buffer", r.stats.Group, lost)
			}
		default:
			return err
		}
		r.agg.Expire(time.Now().UnixNano())
		r.flush()
		r.publish()
	}
	r.agg.Flush()
	r.flush()
	return nil
}

// collect appends a deny flow's record to the batch.
func (r *reader) collect(d *DenyFlow) {
	idx := d.InIf
	if idx == 0 {
		idx = d.OutIf
	}
	r.recs = r.recs[:len(r.recs)+1]
	d.Record(&r.recs[len(r.recs)-1], r.iface(idx))
	if len(r.recs) == cap(r.recs) {
		r.flush()
	}
}

// iface names interface index idx in the source's namespace, cached.
func (r *reader) iface(idx uint32) string {
	if idx == 0 {
		return ""
	}
	if time.Since(r.ifAge) > time.Minute { // indexes are reused after a delete: forget old names
		clear(r.ifaces)
		r.ifAge = time.Now()
	}
	if n, ok := r.ifaces[idx]; ok {
		return n
	}
	var name string
	look := func() error {
		ifc, err := net.InterfaceByIndex(int(idx))
		if err == nil {
			name = ifc.Name
		}
		return err
	}
	if r.src.cfg.Netns != nil {
		_ = r.src.cfg.Netns(look)
	} else {
		_ = look()
	}
	r.ifaces[idx] = name // "" when gone: not looked up again this minute
	return name
}

// flush emits the batch.
func (r *reader) flush() {
	if len(r.recs) == 0 {
		return
	}
	r.src.emitMu.Lock()
	err := r.src.emit(r.recs)
	r.src.emitMu.Unlock()
	r.mu.Lock()
	r.stats.Exported += uint64(len(r.recs))
	if err != nil {
		r.stats.EmitErrors++
	}
	r.mu.Unlock()
	r.recs = r.recs[:0]
}

func (r *reader) publish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Socket, r.stats.Aggregator = r.sock.Stats(), r.agg.Stats
	r.stats.Flows, r.stats.Evicted = r.agg.Table.Len(), r.agg.Table.Evicted
}
