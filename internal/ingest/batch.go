package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-dev/weir/internal/clickhouse"
	"github.com/weir-dev/weir/internal/wire"
)

// batch is the rows waiting for one INSERT: the messages' values back to
// back (already RowBinary rows of flows_input's columns: nothing is
// decoded or re-encoded), and per partition the last message taken, whose
// offset the commit after the insert names.
type batch struct {
	buf   []byte
	rows  int
	first time.Time             // when the first row arrived
	last  map[int32]*kgo.Record // the topic's partitions: the last message added or skipped
	keep  int                   // buf's capacity kept between batches
	lastL []*kgo.Record         // reused for the commit
}

func newBatch(maxBytes int) *batch {
	return &batch{last: map[int32]*kgo.Record{}, keep: maxBytes + maxBytes/8}
}

// reset empties b after a commit, giving back a buffer grown past its
// bound (one message over BatchBytes).
func (b *batch) reset() {
	b.buf, b.rows = b.buf[:0], 0
	if cap(b.buf) > b.keep {
		b.buf = nil
	}
	clear(b.last)
}

// Skip reasons, the label values of weir_ingest_skipped_messages_total.
const (
	skipHeader    = iota // no weir.schema header, two, or one of another form
	skipVersion          // a row of another layout version
	skipMalformed        // a row cut short, or a string past its bound
	skipRows             // fewer or more rows than the header names
	numSkip
)

var skipNames = [numSkip]string{"header", "version", "malformed", "rows"}

// Check reads a message's header and checks its rows: how many it holds,
// or why it is to be skipped (reason ≥ 0, and the error).
func Check(r *kgo.Record) (rows, reason int, err error) {
	var hdr []byte
	n := 0
	for _, h := range r.Headers {
		if h.Key == wire.SchemaHeader {
			hdr = h.Value
			n++
		}
	}
	if n != 1 {
		return 0, skipHeader, fmt.Errorf("%w: %d %s headers, want 1", wire.ErrHeader, n, wire.SchemaHeader)
	}
	rows, err = wire.ParseSchema(hdr)
	if err != nil {
		return 0, skipHeader, err
	}
	if err := wire.CheckRows(r.Value, rows); err != nil {
		switch {
		case errors.Is(err, wire.ErrVersion):
			return 0, skipVersion, err
		case errors.Is(err, wire.ErrRows):
			return 0, skipRows, err
		}
		return 0, skipMalformed, err
	}
	return rows, -1, nil
}

// add puts a message's rows into the batch, or skips and counts it.
func (in *Ingest) add(b *batch, r *kgo.Record) {
	b.last[r.Partition] = r
	if in.replayed(r) {
		in.st.replayed.Add(1)
		in.lg.printf("replayed", "weir ingest: skipped the message at %s partition %d offset %d: at or below offset %d, already inserted "+
			"(the group read it again after a lost commit; counted in weir_ingest_replayed_messages_total)", r.Topic, r.Partition, r.Offset, in.marks.known[r.Partition])
		return
	}
	rows, reason, err := Check(r)
	if reason >= 0 {
		in.st.skipped[reason].Add(1)
		in.lg.printf("skip-"+skipNames[reason], "weir ingest: skipped the message at %s partition %d offset %d: %v (counted in weir_ingest_skipped_messages_total)",
			r.Topic, r.Partition, r.Offset, err)
		return
	}
	if b.rows == 0 {
		b.first = time.Now()
	}
	b.buf = append(b.buf, r.Value...)
	b.rows += rows
	in.st.messages.Add(1)
	in.st.buffered.Store(int64(b.rows))
}

// flush inserts the batch, retrying with backoff while ClickHouse is away
// or refuses, records the partitions' last offsets in ClickHouse (the
// marks), then commits the offsets of every message in it (and of the
// skipped ones). It returns an error only when ctx ends first: then
// nothing is committed.
func (in *Ingest) flush(ctx context.Context, b *batch) error {
	if b.rows > 0 {
		if err := in.insertRetrying(ctx, b.buf); err != nil {
			return err
		}
		in.st.rows.Add(uint64(b.rows))
		in.st.bytes.Add(uint64(len(b.buf)))
		in.st.inserts.Add(1)
		in.st.lastInsert.Store(time.Now().UnixNano())
		if err := in.record(ctx, b); err != nil {
			return &unrecordedError{rows: b.rows, err: err}
		}
	}
	if len(b.last) > 0 {
		b.lastL = b.lastL[:0]
		for _, r := range b.last {
			b.lastL = append(b.lastL, r)
		}
		in.commit(ctx, b.lastL)
	}
	b.reset()
	in.st.buffered.Store(0)
	return nil
}

// insertRetrying sends rows until ClickHouse acknowledges them or ctx ends.
func (in *Ingest) insertRetrying(ctx context.Context, rows []byte) error {
	wait := retryMin
	for {
		err := in.insertOnce(ctx, rows)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		kind := insertUnreachable
		if errors.Is(err, clickhouse.ErrServer) {
			kind = insertRefused
		}
		in.st.insertErrors[kind].Add(1)
		in.lg.printf("insert-"+insertNames[kind], "weir ingest: inserting %d bytes into %s: %v; retrying in %v (nothing is committed until it succeeds)",
			len(rows), in.cfg.URL, err, wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, retryMax)
	}
}

// insertTimeout bounds one INSERT (a server that takes the connection and
// never answers).
const insertTimeout = 2 * time.Minute

func (in *Ingest) insertOnce(ctx context.Context, rows []byte) error {
	ctx, cancel := context.WithTimeout(ctx, insertTimeout)
	defer cancel()
	rc, err := in.cfg.ClickHouse.Do(ctx, in.insert, nil, bytes.NewReader(rows))
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, io.LimitReader(rc, 1<<20))
	return errors.Join(err, rc.Close())
}

// commit commits the offsets after recs, retrying with backoff for up to
// commitPatience (a broker restarting) unless the group moved on (then a
// retry cannot succeed); a commit that still fails is counted: its rows
// and their marks are in ClickHouse, so the group that reads them again
// after a restart or rebalance skips them (replayed).
func (in *Ingest) commit(ctx context.Context, recs []*kgo.Record) {
	wait := retryMin
	deadline := time.Now().Add(commitPatience)
	for {
		err := in.cl.CommitRecords(ctx, recs...)
		if err == nil {
			in.st.commits.Add(1)
			return
		}
		if ctx.Err() != nil || time.Now().After(deadline) || errors.Is(err, kerr.IllegalGeneration) ||
			errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.RebalanceInProgress) || errors.Is(err, kerr.FencedInstanceID) {
			in.st.commitErrors.Add(1)
			in.lg.printf("commit", "weir ingest: committing offsets of group %s: %v: the inserted rows will be read again and skipped (their offsets are in ingest_offsets)", in.cfg.Group, err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, retryMax)
	}
}

// commitPatience is how long a commit is retried: no new batch is
// inserted meanwhile, so that a broker's restart does not make the group
// read many batches again.
const commitPatience = time.Minute
