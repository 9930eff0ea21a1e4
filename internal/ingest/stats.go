package ingest

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/metrics"
)

// Insert error kinds, the label values of weir_ingest_insert_errors_total.
const (
	insertRefused     = iota // the server answered with an error (a missing table, too many parts, …)
	insertUnreachable        // no answer: connection refused or reset, a timeout
	numInsert
)

var insertNames = [numInsert]string{"refused", "unreachable"}

type counters struct {
	messages, rows, bytes, inserts, commits atomic.Uint64
	commitErrors, fetchErrors               atomic.Uint64
	replayed, markLoads                     atomic.Uint64
	skipped                                 [numSkip]atomic.Uint64
	insertErrors, markErrors                [numInsert]atomic.Uint64
	buffered, lastInsert                    atomic.Int64
}

// Stats are an Ingest's counters.
type Stats struct {
	Messages     uint64            // weir messages taken into batches
	Rows         uint64            // rows ClickHouse acknowledged
	Bytes        uint64            // their RowBinary bytes
	Inserts      uint64            // INSERT statements acknowledged
	Commits      uint64            // offset commits that succeeded
	CommitErrors uint64            // offset commits given up (their rows are read again, skipped as replayed)
	FetchErrors  uint64            // fetch errors from the brokers (franz-go retries)
	Buffered     int               // rows waiting for the next insert
	Skipped      map[string]uint64 // messages skipped, by reason: header, version, malformed, rows
	Replayed     uint64            // messages skipped as at or below their partition's offset already inserted
	InsertErrors map[string]uint64 // failed INSERT attempts (each retried), by kind: refused, unreachable
	OffsetLoads  uint64            // reads of the offsets already inserted (ingest_offsets) at assignments
	OffsetErrors map[string]uint64 // failed reads and writes of ingest_offsets (each retried), by kind
	LastInsert   time.Time         // when the last insert was acknowledged (zero: none yet)
}

// Stats returns the counters.
func (in *Ingest) Stats() Stats {
	c := &in.st
	st := Stats{Messages: c.messages.Load(), Rows: c.rows.Load(), Bytes: c.bytes.Load(), Inserts: c.inserts.Load(),
		Commits: c.commits.Load(), CommitErrors: c.commitErrors.Load(), FetchErrors: c.fetchErrors.Load(),
		Buffered: int(c.buffered.Load()), Skipped: map[string]uint64{}, InsertErrors: map[string]uint64{},
		Replayed: c.replayed.Load(), OffsetLoads: c.markLoads.Load(), OffsetErrors: map[string]uint64{}}
	for i := range c.skipped {
		st.Skipped[skipNames[i]] = c.skipped[i].Load()
	}
	for i := range c.insertErrors {
		st.InsertErrors[insertNames[i]] = c.insertErrors[i].Load()
		st.OffsetErrors[insertNames[i]] = c.markErrors[i].Load()
	}
	if t := c.lastInsert.Load(); t != 0 {
		st.LastInsert = time.Unix(0, t)
	}
	return st
}

// WriteStats prints the counters, as --stats shows them.
func (in *Ingest) WriteStats(w io.Writer) {
	st := in.Stats()
	fmt.Fprintf(w, "ingest: %d rows (%s) from %d messages of %s into %s in %d inserts, %d commits; %d buffered\n",
		st.Rows, format.Bytes(st.Bytes), st.Messages, in.cfg.Kafka.Topic, in.cfg.URL, st.Inserts, st.Commits, st.Buffered)
	fmt.Fprintf(w, "ingest: skipped messages: header %d, version %d, malformed %d, rows %d; insert errors (retried): refused %d, unreachable %d; commit errors %d, fetch errors %d\n",
		st.Skipped["header"], st.Skipped["version"], st.Skipped["malformed"], st.Skipped["rows"],
		st.InsertErrors["refused"], st.InsertErrors["unreachable"], st.CommitErrors, st.FetchErrors)
	fmt.Fprintf(w, "ingest: replayed messages skipped (already inserted) %d; offsets loads %d, errors (retried): refused %d, unreachable %d\n",
		st.Replayed, st.OffsetLoads, st.OffsetErrors["refused"], st.OffsetErrors["unreachable"])
}

// Metric descriptions; docs/metrics.md documents each.
var (
	mMessages = &metrics.Desc{Name: "weir_ingest_messages_total", Help: "Kafka messages of weir rows taken into batches.", Type: metrics.Counter}
	mRows     = &metrics.Desc{Name: "weir_ingest_rows_total", Help: "Rows ClickHouse acknowledged.", Type: metrics.Counter}
	mBytes    = &metrics.Desc{Name: "weir_ingest_bytes_total", Help: "RowBinary bytes of the acknowledged rows.", Type: metrics.Counter}
	mInserts  = &metrics.Desc{Name: "weir_ingest_inserts_total", Help: "INSERT statements ClickHouse acknowledged.", Type: metrics.Counter}
	mCommits  = &metrics.Desc{Name: "weir_ingest_commits_total", Help: "Offset commits of the consumer group that succeeded.", Type: metrics.Counter}
	mBuffered = &metrics.Desc{Name: "weir_ingest_buffered_rows", Help: "Rows waiting for the next insert.", Type: metrics.Gauge}
	mLast     = &metrics.Desc{Name: "weir_ingest_last_insert_timestamp_seconds", Help: "When the last insert was acknowledged (Unix seconds; 0: none yet).", Type: metrics.Gauge}
	mSkipped  = &metrics.Desc{Name: "weir_ingest_skipped_messages_total", Help: "Messages skipped, not inserted, by reason: header, version, malformed, rows.",
		Type: metrics.Counter, Labels: []string{"reason"}}
	mInsertErrors = &metrics.Desc{Name: "weir_ingest_insert_errors_total", Help: "Failed INSERT attempts, each retried, by kind: refused, unreachable.",
		Type: metrics.Counter, Labels: []string{"kind"}}
	mCommitErrors = &metrics.Desc{Name: "weir_ingest_commit_errors_total", Help: "Offset commits given up after retries: their rows are read again and skipped as replayed.", Type: metrics.Counter}
	mFetchErrors  = &metrics.Desc{Name: "weir_ingest_fetch_errors_total", Help: "Fetch errors from the brokers (franz-go retries them).", Type: metrics.Counter}
	mReplayed     = &metrics.Desc{Name: "weir_ingest_replayed_messages_total",
		Help: "Messages at or below their partition's offset already inserted (read again after a lost commit): skipped, committed.", Type: metrics.Counter}
	mOffsetLoads  = &metrics.Desc{Name: "weir_ingest_offsets_loads_total", Help: "Reads of the offsets already inserted (ingest_offsets), at start and assignments.", Type: metrics.Counter}
	mOffsetErrors = &metrics.Desc{Name: "weir_ingest_offsets_errors_total", Help: "Failed reads and writes of ingest_offsets, each retried, by kind: refused, unreachable.",
		Type: metrics.Counter, Labels: []string{"kind"}}
)

type collector struct{ in *Ingest }

// Collector returns a metrics.Collector of the ingest's counters.
func (in *Ingest) Collector() metrics.Collector { return collector{in} }

// Describe lists every metric the collector emits.
func (c collector) Describe() []*metrics.Desc {
	return []*metrics.Desc{mMessages, mRows, mBytes, mInserts, mCommits, mBuffered, mLast, mSkipped, mInsertErrors, mCommitErrors, mFetchErrors,
		mReplayed, mOffsetLoads, mOffsetErrors}
}

// Collect writes the counters.
func (c collector) Collect(w *metrics.Writer) {
	st := c.in.Stats()
	w.Sample(mMessages, float64(st.Messages))
	w.Sample(mRows, float64(st.Rows))
	w.Sample(mBytes, float64(st.Bytes))
	w.Sample(mInserts, float64(st.Inserts))
	w.Sample(mCommits, float64(st.Commits))
	w.Sample(mBuffered, float64(st.Buffered))
	last := 0.0
	if !st.LastInsert.IsZero() {
		last = float64(st.LastInsert.UnixNano()) / 1e9
	}
	w.Sample(mLast, last)
	for _, r := range skipNames {
		w.Sample(mSkipped, float64(st.Skipped[r]), r)
	}
	for _, k := range insertNames {
		w.Sample(mInsertErrors, float64(st.InsertErrors[k]), k)
	}
	w.Sample(mCommitErrors, float64(st.CommitErrors))
	w.Sample(mFetchErrors, float64(st.FetchErrors))
	w.Sample(mReplayed, float64(st.Replayed))
	w.Sample(mOffsetLoads, float64(st.OffsetLoads))
	for _, k := range insertNames {
		w.Sample(mOffsetErrors, float64(st.OffsetErrors[k]), k)
	}
}

// logger prints a kind of message at most once every logEvery, with how
// many of that kind it held back.
type logger struct {
	w    io.Writer
	mu   sync.Mutex
	last map[string]time.Time
	held map[string]int
}

const logEvery = 10 * time.Second

func (l *logger) printf(kind, format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last, l.held = map[string]time.Time{}, map[string]int{}
	}
	now := time.Now()
	if t, ok := l.last[kind]; ok && now.Sub(t) < logEvery {
		l.held[kind]++
		return
	}
	msg := fmt.Sprintf(format, a...)
	if n := l.held[kind]; n > 0 {
		msg += fmt.Sprintf(" (and %d more like it since the last)", n)
	}
	fmt.Fprintln(l.w, msg)
	l.last[kind], l.held[kind] = now, 0
}
