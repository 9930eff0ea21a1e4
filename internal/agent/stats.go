package agent

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/sink"
	ipfixsink "github.com/weir-dev/weir/internal/sink/ipfix"
	"github.com/weir-dev/weir/internal/sink/kafka"
	"github.com/weir-dev/weir/internal/store"
)

// writeQueueStats writes each sink queue's counters (--stats): the one
// place the "sink queue" lines come from.
func writeQueueStats(w io.Writer, queues []*sink.Queue) {
	n := format.Count
	for _, q := range queues {
		qs := q.Stats()
		fmt.Fprintf(w, "sink queue  %s: %s records written, %s dropped", q.Name(), n(qs.Written), n(qs.Dropped))
		if qs.Lost > 0 {
			fmt.Fprintf(w, ", %s lost at shutdown", n(qs.Lost))
		}
		if qs.Errors > 0 {
			fmt.Fprintf(w, "; %s failed writes", n(qs.Errors))
		}
		fmt.Fprintln(w)
	}
}

// writeStoreStats says what went to the store, at exit (its problems were
// said as they happened): what it wrote, what it dropped (full buffer
// while writes failed, or given up on at Close), failed writes by reason,
// and the records still buffered when weir stopped waiting for it (a
// signal's grace ended before the store's Close did): lost at exit.
func writeStoreStats(w io.Writer, s *store.Store, dir string) {
	st := s.Stats()
	fmt.Fprintf(w, "store: %d records in %d blocks (%s) written to %s; %s on disk; %d corrupt blocks skipped, %d damaged indexes rebuilt, %d records dropped",
		st.RowsWritten, st.BlocksWritten, format.Bytes(uint64(st.BytesWritten)), dir, format.Bytes(uint64(st.BytesOnDisk)),
		st.CorruptBlocks, st.CorruptIndexes, st.DroppedRows)
	if lost := st.PendingRows; lost > 0 && !st.Abandoned { // abandoned: already in DroppedRows
		fmt.Fprintf(w, ", %d records still buffered at exit (lost)", lost)
	}
	var errs int64
	for _, n := range st.WriteErrors {
		errs += n
	}
	fmt.Fprintf(w, ", %d failed writes", errs)
	for _, r := range store.WriteErrorReasons {
		if n := st.WriteErrors[r]; n > 0 {
			fmt.Fprintf(w, " (%s %d)", r, n)
		}
	}
	if st.PrunedBlocks > 0 {
		fmt.Fprintf(w, "; retention deleted %d blocks (%d records)", st.PrunedBlocks, st.PrunedRows)
	}
	fmt.Fprintln(w)
}

// writeIPFIXStats says what an IPFIX exporter sent and did not deliver.
func writeIPFIXStats(w io.Writer, x *ipfixsink.Exporter) {
	st := x.Stats()
	fmt.Fprintf(w, "export: %d records in %d IPFIX messages (%s) to %s; %d records undelivered",
		st.Records, st.Messages, format.Bytes(st.Bytes), x.URL(), st.DroppedRecords)
	sep := " ("
	for _, r := range x.Reasons() {
		if n := st.Undelivered[r]; n > 0 {
			fmt.Fprintf(w, "%s%s %d", sep, r, n)
			sep = ", "
		}
	}
	if sep == ", " {
		fmt.Fprint(w, ")")
	}
	fmt.Fprintf(w, ", %d send errors", st.SendErrors)
	if st.Connects+st.DialErrors > 0 {
		fmt.Fprintf(w, ", %d connects, %d failed dials", st.Connects, st.DialErrors)
	}
	fmt.Fprintln(w)
}

// writeKafkaStats says what a Kafka destination produced and dropped.
func writeKafkaStats(w io.Writer, k *kafka.Sink) {
	st := k.Stats()
	fmt.Fprintf(w, "export: %d records to %s: %d acknowledged (%s in %d messages), %d buffered; dropped:",
		st.Records, k.URL(), st.Produced, format.Bytes(st.Bytes), st.Messages, st.Buffered)
	for r, n := range st.Dropped {
		fmt.Fprintf(w, " %s %d", kafka.DropReason(r), n)
	}
	if len(st.Errors) > 0 {
		fmt.Fprint(w, "; errors:")
		for _, e := range slices.Sorted(maps.Keys(st.Errors)) {
			fmt.Fprintf(w, " %s %d", e, st.Errors[e])
		}
	}
	fmt.Fprintln(w)
}
