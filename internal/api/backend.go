package api

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/query"
	"github.com/weir-dev/weir/internal/store"
)

// ErrNoLive is returned by a Backend that has no live flows: it reads a
// store alone, with no running capture beside it.
var ErrNoLive = errors.New("this server has no live flows: it reads stored flows only (weir serve --live-url points it at a running capture)")

// Backend answers the API's questions. The embedded store is one
// (StoreBackend); a ClickHouse backend and a running capture's own tables
// fit behind the same methods. Implementations must be safe for
// concurrent use and honour ctx.
type Backend interface {
	// Name says what answers: "store", "clickhouse", ...
	Name() string
	// Query answers q; with live it adds the flows a running capture has
	// not written yet (ErrNoLive when there is none).
	Query(ctx context.Context, q *query.Query, live bool) (*query.Result, error)
	// Live returns the flows live now, largest first (ErrNoLive when there
	// is no running capture).
	Live(ctx context.Context) ([]flow.Record, error)
	// Holdings says what the backend holds: interfaces, nodes, time spans.
	Holdings(ctx context.Context) (*Holdings, error)
	// Ready returns nil when queries can be answered, else why not.
	Ready(ctx context.Context) error
}

// Holdings is what a backend holds.
type Holdings struct {
	Interfaces []IfaceSpan `json:"interfaces"`
	// Nodes are the observation points whose flows the backend holds
	// (flow.Record.Node: agents' node names, collected exporters),
	// sorted; records without a node are in no entry.
	Nodes []string `json:"nodes"`
	// First and Last bound the stored flows (earliest start, latest end);
	// nil when nothing is stored.
	First *time.Time `json:"first"`
	Last  *time.Time `json:"last"`
	Live  bool       `json:"live"` // live flows can be asked for (Live, live=true)
}

// IfaceSpan is one interface's stored flows.
type IfaceSpan struct {
	Iface  string    `json:"iface"`
	First  time.Time `json:"first"`
	Last   time.Time `json:"last"`
	Days   int       `json:"days"`
	Blocks int       `json:"blocks"`
	Flows  int64     `json:"flows"`
	Bytes  int64     `json:"bytes"` // on disk
	// Nodes are where the interface's records were observed, sorted
	// (records without a node in none; the store backend fills it).
	Nodes []string `json:"nodes,omitempty"`
}

// LiveFunc returns the flows a running capture holds now (in its tables,
// and emitted but not yet stored).
type LiveFunc func(ctx context.Context) ([]flow.Record, error)

// LiveFromURL reads a running capture's live flows from its /flows/live
// endpoint on this host (query.FetchLive: loopback only).
func LiveFromURL(url string) LiveFunc {
	return func(ctx context.Context) ([]flow.Record, error) { return query.FetchLive(ctx, url) }
}

// StoreBackend answers from the embedded flow store, with the live flows
// of a running capture when it has a LiveFunc.
type StoreBackend struct {
	st   *store.Store
	live LiveFunc
}

// NewStoreBackend answers from st (opened read-only, or the capture's own
// store); live may be nil.
func NewStoreBackend(st *store.Store, live LiveFunc) *StoreBackend {
	return &StoreBackend{st: st, live: live}
}

// Name is "store".
func (b *StoreBackend) Name() string { return "store" }

// Collector is the store's metrics (NewStandalone serves them).
func (b *StoreBackend) Collector() metrics.Collector { return b.st.Collector() }

// Query runs q over the store; with live, the live flows and the blocks
// are taken from the same moment (query.LiveSnapshotFunc).
func (b *StoreBackend) Query(ctx context.Context, q *query.Query, live bool) (*query.Result, error) {
	var recs []flow.Record
	if live {
		if b.live == nil {
			return nil, ErrNoLive
		}
		var err error
		if recs, q.Blocks, err = query.LiveSnapshotFunc(ctx, b.st, b.live); err != nil {
			return nil, err
		}
	}
	return query.Run(ctx, b.st, q, recs)
}

// TopSeries is Query for a top N with BinTotals that keeps what the
// top's series need (query.RunTopSeries): /api/v1/topseries then reads
// the blocks once.
func (b *StoreBackend) TopSeries(ctx context.Context, q *query.Query, live bool) (*query.Result, *query.TopSeries, error) {
	var recs []flow.Record
	if live {
		if b.live == nil {
			return nil, nil, ErrNoLive
		}
		var err error
		if recs, q.Blocks, err = query.LiveSnapshotFunc(ctx, b.st, b.live); err != nil {
			return nil, nil, err
		}
	}
	return query.RunTopSeries(ctx, b.st, q, recs)
}

// Live returns the running capture's flows.
func (b *StoreBackend) Live(ctx context.Context) ([]flow.Record, error) {
	if b.live == nil {
		return nil, ErrNoLive
	}
	return b.live(ctx)
}

// Holdings lists the stored interfaces with their spans, from the
// blocks' summaries, and the nodes, from each block's node column (a few
// bytes a block; a damaged one is left out, as queries leave it).
func (b *StoreBackend) Holdings(ctx context.Context) (*Holdings, error) {
	bl, err := b.st.Blocks(0, 0, nil)
	if err != nil {
		return nil, err
	}
	h := &Holdings{Interfaces: []IfaceSpan{}, Nodes: []string{}, Live: b.live != nil}
	at := map[string]int{}
	days := map[string]map[string]bool{}
	nodes := map[string]bool{}
	var names []string
	for i := range bl {
		if i%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		blk := &bl[i]
		first, last := time.Unix(0, blk.MinStart).UTC(), time.Unix(0, blk.MaxEnd).UTC()
		j, ok := at[blk.Iface]
		if !ok {
			j = len(h.Interfaces)
			at[blk.Iface] = j
			days[blk.Iface] = map[string]bool{}
			h.Interfaces = append(h.Interfaces, IfaceSpan{Iface: blk.Iface, First: first, Last: last})
		}
		sp := &h.Interfaces[j]
		if first.Before(sp.First) {
			sp.First = first
		}
		if last.After(sp.Last) {
			sp.Last = last
		}
		sp.Blocks++
		sp.Flows += int64(blk.Rows)
		sp.Bytes += int64(blk.Size)
		days[blk.Iface][blk.Day] = true
		if names, err = b.st.Nodes(blk, names[:0]); err == nil {
			for _, n := range names {
				if n != "" && !nodes[n] {
					nodes[n] = true
					h.Nodes = append(h.Nodes, n)
				}
				if n != "" && !slices.Contains(sp.Nodes, n) {
					sp.Nodes = append(sp.Nodes, n)
				}
			}
		}
	}
	slices.Sort(h.Nodes)
	for i := range h.Interfaces {
		slices.Sort(h.Interfaces[i].Nodes)
	}
	for i := range h.Interfaces {
		sp := &h.Interfaces[i]
		sp.Days = len(days[sp.Iface])
		if h.First == nil || sp.First.Before(*h.First) {
			t := sp.First
			h.First = &t
		}
		if h.Last == nil || sp.Last.After(*h.Last) {
			t := sp.Last
			h.Last = &t
		}
	}
	slices.SortFunc(h.Interfaces, func(a, b IfaceSpan) int { return strings.Compare(a.Iface, b.Iface) })
	return h, nil
}

// Ready checks that the store's directory can still be listed.
func (b *StoreBackend) Ready(context.Context) error {
	_, err := b.st.Ifaces()
	return err
}
