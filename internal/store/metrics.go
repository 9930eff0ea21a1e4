package store

import "github.com/weir-dev/weir/internal/metrics"

var (
	mBlocks    = &metrics.Desc{Name: "weir_store_blocks_written_total", Help: "Blocks the store committed.", Type: metrics.Counter}
	mRows      = &metrics.Desc{Name: "weir_store_rows_written_total", Help: "Flow records the store committed.", Type: metrics.Counter}
	mBytes     = &metrics.Desc{Name: "weir_store_bytes_written_total", Help: "Block bytes the store appended.", Type: metrics.Counter}
	mDisk      = &metrics.Desc{Name: "weir_store_disk_bytes", Help: "Disk space of blocks and indexes under the data directory, as of the last writeout or prune.", Type: metrics.Gauge}
	mCorrupt   = &metrics.Desc{Name: "weir_store_corrupt_blocks_total", Help: "Blocks skipped because they failed their checks, were cut off, or lie past the end of their file.", Type: metrics.Counter}
	mBadIndex  = &metrics.Desc{Name: "weir_store_corrupt_indexes_total", Help: "Partition indexes that failed their checksum and were rebuilt by scanning.", Type: metrics.Counter}
	mDropped   = &metrics.Desc{Name: "weir_store_dropped_rows_total", Help: "Flow records handed to the store and not written: over the buffer bounds while writes failed, or still buffered when closing gave up.", Type: metrics.Counter}
	mPending   = &metrics.Desc{Name: "weir_store_pending_rows", Help: "Flow records buffered for the next writeout, or written out and waiting for their commit.", Type: metrics.Gauge}
	mWriteErrs = &metrics.Desc{Name: "weir_store_write_errors_total", Help: "Failed writeouts and commits, by reason.", Type: metrics.Counter, Labels: []string{"reason"}}
	mPruned    = &metrics.Desc{Name: "weir_store_pruned_partitions_total", Help: "Day partitions deleted whole by retention (--retention, --max-size).", Type: metrics.Counter}
	mPrunedBl  = &metrics.Desc{Name: "weir_store_pruned_blocks_total", Help: "Blocks deleted by retention.", Type: metrics.Counter}
	mPrunedR   = &metrics.Desc{Name: "weir_store_pruned_rows_total", Help: "Flow records in the blocks deleted by retention.", Type: metrics.Counter}
	mPrunedB   = &metrics.Desc{Name: "weir_store_pruned_bytes_total", Help: "Disk space freed by retention.", Type: metrics.Counter}
)

type collector struct{ s *Store }

// Collector returns a metrics.Collector of the store's counters.
func (s *Store) Collector() metrics.Collector { return collector{s} }

// Describe lists every metric the collector emits.
func (c collector) Describe() []*metrics.Desc {
	return []*metrics.Desc{mBlocks, mRows, mBytes, mDisk, mCorrupt, mBadIndex, mDropped, mPending, mWriteErrs,
		mPruned, mPrunedBl, mPrunedR, mPrunedB}
}

// Collect writes the store's counters.
func (c collector) Collect(w *metrics.Writer) {
	s := c.s
	for _, x := range []struct {
		d *metrics.Desc
		v int64
	}{{mBlocks, s.blocksWritten.Load()}, {mRows, s.rowsWritten.Load()}, {mBytes, s.bytesWritten.Load()},
		{mDisk, s.bytesOnDisk.Load()}, {mCorrupt, s.corruptBlocks.Load()}, {mBadIndex, s.corruptIndexes.Load()},
		{mDropped, s.droppedRows.Load()}, {mPending, s.pendingRows.Load()}, {mPruned, s.prunedParts.Load()},
		{mPrunedBl, s.prunedBlocks.Load()}, {mPrunedR, s.prunedRows.Load()}, {mPrunedB, s.prunedBytes.Load()}} {
		w.Sample(x.d, float64(x.v))
	}
	for r, name := range WriteErrorReasons {
		w.Sample(mWriteErrs, float64(s.writeErrs[r].Load()), name)
	}
}
