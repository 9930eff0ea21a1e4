package query

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/sink"
	"github.com/weir-dev/weir/internal/store"
)

// Export selects stored records to stream out whole (weir export): the
// records of the interfaces asked for whose Start is in [From, To) and
// that match Cond. Nothing is grouped or merged: every stored record is
// one exported record.
type Export struct {
	Cond     *Condition // nil: every record
	From, To time.Time  // zero: unbounded
	Ifaces   []string   // empty: every interface
	// Batch is the most records handed to the sink at once (default
	// DefaultExportBatch); the batch is reused, so memory does not grow
	// with the store.
	Batch int
	// Blocks, when not nil, are the blocks to read instead of listing
	// the store's (still filtered by time, interface and condition).
	Blocks []store.BlockInfo
}

// DefaultExportBatch is Export.Batch's default.
const DefaultExportBatch = 4096

// ExportStats say what an export read and wrote.
type ExportStats struct {
	Blocks        int   `json:"blocks"`         // blocks in the time range and interfaces asked for
	BlocksSkipped int   `json:"blocks_skipped"` // ruled out by their summaries, never read
	BlocksCorrupt int   `json:"blocks_corrupt"` // failed their checks: left out, counted as the store warns
	BlocksPruned  int   `json:"blocks_pruned"`  // deleted by retention after they were listed
	RowsScanned   int64 `json:"rows_scanned"`
	Records       int64 `json:"records"` // records handed to the sink
	Elapsed       time.Duration
}

// ErrExportSink wraps the error of the sink an export writes to, so a
// caller can tell it from a failure to read the store.
var ErrExportSink = errors.New("export: sink")

// ExportRecords streams the records x selects from s to dst, block by
// block: each block's rows in the store's order (by Start), blocks by
// interface, day and position in their file, so records are not in one
// global time order. Blocks are decoded on a goroutine of their own while
// the previous block's records are written; memory is three decoded
// blocks and one batch of records, whatever the store's size. Damaged
// blocks are left out and counted (BlocksCorrupt), as queries do. dst is
// not closed.
func ExportRecords(ctx context.Context, s *store.Store, x *Export, dst sink.Sink) (ExportStats, error) {
	start := time.Now()
	var st ExportStats
	q := Query{From: x.From, To: x.To}
	from, to := bounds(&q)
	blocks := x.Blocks
	if blocks != nil && len(x.Ifaces) > 0 {
		blocks = slices.DeleteFunc(slices.Clone(blocks), func(b store.BlockInfo) bool { return !slices.Contains(x.Ifaces, b.Iface) })
	}
	if blocks == nil {
		var damaged []store.Damage
		var err error
		if blocks, damaged, err = s.BlocksDamaged(from, to-1, x.Ifaces); err != nil {
			return st, err
		}
		st.BlocksCorrupt = len(damaged)
	}
	st.Blocks = len(blocks) + st.BlocksCorrupt
	n := x.Batch
	if n <= 0 {
		n = DefaultExportBatch
	}
	e := exporter{cond: x.Cond, from: from, to: to, batch: make([]flow.Record, 0, n), dst: dst, st: &st}
	err := e.run(ctx, s, blocks)
	if err == nil {
		err = e.flush()
	}
	st.Elapsed = time.Since(start)
	return st, err
}

// exporter is one export's state.
type exporter struct {
	cond     *Condition
	from, to int64
	batch    []flow.Record
	dst      sink.Sink
	st       *ExportStats
}

// decoded is one block, decoded and filtered, on its way from the reading
// goroutine to the writing one.
type decoded struct {
	b    *store.BlockInfo
	cols store.Columns
	sel  []bool // rows that match the condition and the time range
	err  error
}

// exportDepth is how many decoded blocks an export holds: one being
// read, one waiting, one being written. Reading (decoding every column)
// and writing (building records, the sink's encoding) then run on two
// cores at once, in memory that does not grow with the store.
const exportDepth = 3

// run reads blocks on one goroutine and hands them in order to this one,
// which makes records and writes them.
func (e *exporter) run(ctx context.Context, s *store.Store, blocks []store.BlockInfo) error {
	free := make(chan *decoded, exportDepth)
	for range exportDepth {
		free <- new(decoded)
	}
	full := make(chan *decoded, exportDepth)
	stop := make(chan struct{})
	var skipped, corrupt, pruned atomic.Int64
	go func() {
		defer close(full)
		var ev evaluator
		for i := range blocks {
			b := &blocks[i]
			if !e.cond.mayMatch(b) || b.MinStart >= e.to || b.MaxEnd < e.from {
				skipped.Add(1)
				continue
			}
			var sl *decoded
			select {
			case sl = <-free:
			case <-stop:
				return
			}
			sl.b, sl.err = b, nil
			if err := s.ReadBlock(b, store.ColAll, &sl.cols); err != nil {
				switch {
				case errors.Is(err, store.ErrCorrupt):
					corrupt.Add(1)
					free <- sl
					continue
				case errors.Is(err, store.ErrPruned):
					pruned.Add(1)
					free <- sl
					continue
				}
				sl.err = fmt.Errorf("export: %w", err)
			} else {
				e.filter(&ev, sl)
			}
			select {
			case full <- sl:
			case <-stop:
				return
			}
			if sl.err != nil {
				return
			}
		}
	}()
	var err error
	for sl := range full {
		if err == nil {
			err = ctx.Err()
		}
		if err == nil {
			err = sl.err
		}
		if err == nil {
			e.st.RowsScanned += int64(sl.cols.N)
			err = e.rows(sl)
		}
		if err != nil {
			select {
			case <-stop:
			default:
				close(stop) // the reader stops; full is drained until it closes
			}
		}
		free <- sl
	}
	e.st.BlocksSkipped += int(skipped.Load())
	e.st.BlocksCorrupt += int(corrupt.Load())
	e.st.BlocksPruned += int(pruned.Load())
	return err
}

// filter selects the decoded's rows that match the condition and whose
// Start is in range.
func (e *exporter) filter(ev *evaluator, sl *decoded) {
	c := &sl.cols
	sl.sel = slices.Grow(sl.sel[:0], c.N)[:c.N]
	ev.filter(e.cond, c, sl.sel)
	if b := sl.b; b.MinStart < e.from || b.MaxEnd >= e.to { // not every row's Start is in range
		for i, st := range c.Start[:c.N] {
			sl.sel[i] = sl.sel[i] && st >= e.from && st < e.to
		}
	}
}

// rows makes records of the decoded's selected rows and writes them in
// batches.
func (e *exporter) rows(sl *decoded) error {
	for i, ok := range sl.sel {
		if !ok {
			continue
		}
		e.batch = append(e.batch, flow.Record{})
		rowRecord(&sl.cols, i, &e.batch[len(e.batch)-1])
		if len(e.batch) == cap(e.batch) {
			if err := e.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush hands the batch to the sink.
func (e *exporter) flush() error {
	if len(e.batch) == 0 {
		return nil
	}
	err := e.dst.Write(e.batch)
	if err == nil {
		e.st.Records += int64(len(e.batch))
	}
	clear(e.batch) // drop the blocks' strings and pointers: later blocks must not pin them
	e.batch = e.batch[:0]
	if err != nil {
		return fmt.Errorf("%w: %w", ErrExportSink, err)
	}
	return nil
}

// rowRecord fills r with row i of c (read with store.ColAll): every
// field the store keeps. The NAT key has the record's protocol.
func rowRecord(c *store.Columns, i int, r *flow.Record) {
	r.Key = flow.Key{SrcAddr: c.SrcAddr[i], DstAddr: c.DstAddr[i], SrcPort: c.SrcPort[i], DstPort: c.DstPort[i],
		Proto: c.Proto[i], ICMPType: c.ICMPType[i], ICMPCode: c.ICMPCode[i], IPVersion: c.IPVersion[i]}
	r.Packets, r.Bytes, r.RevPackets, r.RevBytes = c.Packets[i], c.Bytes[i], c.RevPackets[i], c.RevBytes[i]
	r.TCPFlags, r.RevTCPFlags, r.EndReason = c.TCPFlags[i], c.RevTCPFlags[i], flow.EndReason(c.EndReason[i])
	r.VLAN, r.Start, r.End, r.Iface, r.Node = c.VLAN[i], c.Start[i], c.End[i], c.Iface, c.Node[i]
	r.DropPackets, r.DropBytes, r.DropReason, r.Sampling = c.DropPackets[i], c.DropBytes[i], c.DropReason[i], c.Sampling[i]
	if v := c.NATVersion[i]; v != 0 {
		r.PostNAT = flow.Key{SrcAddr: c.NATSrcAddr[i], DstAddr: c.NATDstAddr[i], SrcPort: c.NATSrcPort[i], DstPort: c.NATDstPort[i],
			IPVersion: v, Proto: r.Key.Proto, ICMPType: r.Key.ICMPType, ICMPCode: r.Key.ICMPCode}
	}
	r.Verdict, r.Rule, r.Mark, r.Zone = flow.Verdict(c.Verdict[i]), c.Rule[i], c.Mark[i], c.Zone[i]
	r.SrcWorkload, r.DstWorkload, r.Service = c.SrcWorkload[i], c.DstWorkload[i], c.Service[i]
	r.ServiceMatch = flow.ServiceMatch(c.ServiceMatch[i])
}
