// Package ingest is `weir ingest`: a Kafka consumer group that reads weir's
// topic (internal/wire's rows, one or many a message) and inserts them in
// batches into ClickHouse over HTTP (RowBinary into the table the views
// read, flows_input), committing the group's offsets only after ClickHouse
// acknowledged the insert.
//
// Delivery is effectively once: after each insert, and before the Kafka
// commit, the last offset inserted of each partition is recorded in
// ClickHouse (clickhouse.TableOffsets); a consumer knows these marks (its
// own, and ClickHouse's, read when partitions are assigned to it) and
// skips, counts and commits a message at or below its partition's mark.
// So a commit lost to a broker's restart, a rebalance or a crash after the
// marks were recorded inserts nothing twice. Left: a crash (or a stop
// whose time ran out) between an insert and the recording of its marks,
// an insert retried whose answer was lost (the server had taken it), and
// a consumer that lost its partitions while its insert was under way
// (docs/fleet.md). Nothing is lost while the rows are in the topic's
// retention. Memory is bounded by Config.BatchBytes and franz-go's fetch
// buffers (FetchBytes).
//
// Messages that are not weir's (no or a bad weir.schema header, a row cut
// short or malformed, rows that do not add up to the header) are skipped
// and counted by reason, never inserted and never a stop: their offsets
// are committed with the batch they arrived in.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-dev/weir/internal/clickhouse"
	"github.com/weir-dev/weir/internal/sink/kafka"
)

// Defaults of Config.
const (
	DefaultGroup      = "weir-ingest"
	DefaultBatchRows  = 200000
	DefaultBatchBytes = 64 << 20
	DefaultBatchDelay = time.Second
	DefaultFetchBytes = 16 << 20
	retryMin          = 100 * time.Millisecond
	retryMax          = 5 * time.Second
	pollRecords       = 4096 // messages a poll takes at most: the byte cap is checked between them
)

// Config is one ingest.
type Config struct {
	// Kafka is the topic and the brokers, with their TLS, SASL and client
	// id (a kafka:// URL's; its producer options are not used).
	Kafka *kafka.Config
	// Group is the consumer group (default DefaultGroup): every weir
	// ingest of one group shares the topic's partitions.
	Group string
	// ClickHouse receives the inserts; URL names it in messages.
	ClickHouse clickhouse.Conn
	URL        string
	// Database and Table are where rows go (default weir, flows_input:
	// the views of `weir clickhouse setup` fill flows and the rollups).
	Database, Table string
	// A batch is inserted when it holds BatchRows rows (checked after
	// each poll of at most 4,096 messages) or BatchBytes bytes, or
	// BatchDelay after its first row arrived.
	BatchRows  int
	BatchBytes int
	BatchDelay time.Duration
	// FetchBytes bounds what franz-go fetches ahead of the batch.
	FetchBytes int
	// Log receives what goes wrong (a retry, a skipped message), at most
	// once per kind every 10 s (nil: os.Stderr).
	Log io.Writer
}

// Ingest is a running consumer. Start it once; Stop flushes and commits.
type Ingest struct {
	cfg    Config
	cl     *kgo.Client
	insert string // the INSERT statement

	stop  context.CancelFunc // ends the loop's polling (Stop)
	abort context.CancelFunc // ends inserts and commits too (Stop's ctx ended)
	done  chan struct{}
	err   error // the loop's, read after done

	stopOnce sync.Once

	marks marks // per partition, the highest offset known inserted
	st    counters
	lg    logger
}

// ErrConfig wraps every configuration mistake.
var ErrConfig = errors.New("ingest: bad configuration")

// New checks cfg and builds the consumer; nothing is dialled before Start.
func New(cfg Config) (*Ingest, error) {
	if cfg.Kafka == nil || cfg.ClickHouse == nil {
		return nil, fmt.Errorf("%w: a topic and a ClickHouse server are required", ErrConfig)
	}
	if cfg.Group == "" {
		cfg.Group = DefaultGroup
	}
	if cfg.Database == "" {
		cfg.Database = "weir"
	}
	if cfg.Table == "" {
		cfg.Table = clickhouse.TableInput
	}
	if err := clickhouse.CheckIdent("database", cfg.Database); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := clickhouse.CheckIdent("table", cfg.Table); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cfg.BatchRows == 0 {
		cfg.BatchRows = DefaultBatchRows
	}
	if cfg.BatchBytes == 0 {
		cfg.BatchBytes = DefaultBatchBytes
	}
	if cfg.BatchDelay == 0 {
		cfg.BatchDelay = DefaultBatchDelay
	}
	if cfg.FetchBytes == 0 {
		cfg.FetchBytes = DefaultFetchBytes
	}
	switch {
	case cfg.BatchRows < 1 || cfg.BatchRows > 1<<24:
		return nil, fmt.Errorf("%w: batch rows %d: want 1 to %d", ErrConfig, cfg.BatchRows, 1<<24)
	case cfg.BatchBytes < 1<<20 || cfg.BatchBytes > 1<<30:
		return nil, fmt.Errorf("%w: batch bytes %d: want 1 MiB to 1 GiB", ErrConfig, cfg.BatchBytes)
	case cfg.BatchDelay < time.Millisecond || cfg.BatchDelay > 10*time.Minute:
		return nil, fmt.Errorf("%w: batch delay %v: want 1ms to 10m", ErrConfig, cfg.BatchDelay)
	case cfg.FetchBytes < 1<<20 || cfg.FetchBytes > 1<<30:
		return nil, fmt.Errorf("%w: fetch bytes %d: want 1 MiB to 1 GiB", ErrConfig, cfg.FetchBytes)
	}
	if cfg.Log == nil {
		cfg.Log = os.Stderr
	}
	in := &Ingest{cfg: cfg, done: make(chan struct{}),
		insert: "INSERT INTO " + cfg.Database + "." + cfg.Table + " FORMAT RowBinary"}
	in.lg.w = cfg.Log
	in.marks.known = map[int32]int64{}
	opts := append(kafka.ConnOpts(cfg.Kafka),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Kafka.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), // a new group reads what agents sent before it started
		kgo.DisableAutoCommit(),                           // offsets only after ClickHouse took the rows
		kgo.BlockRebalanceOnPoll(),                        // partitions move only between batches (AllowRebalance)
		kgo.FetchMaxBytes(int32(cfg.FetchBytes)),
		kgo.FetchMaxPartitionBytes(int32(min(cfg.FetchBytes, 8<<20))),
		kgo.MaxConcurrentFetches(2),
		kgo.OnPartitionsAssigned(in.onAssigned), // their marks are read again from ClickHouse
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	in.cl = cl
	return in, nil
}

// Start starts consuming and inserting until Stop (or ctx ends: then the
// batch being filled is dropped uninserted and uncommitted, for the group
// to read again).
func (in *Ingest) Start(ctx context.Context) {
	ictx, abort := context.WithCancel(ctx)
	pctx, stop := context.WithCancel(ictx)
	in.abort, in.stop = abort, stop
	go func() {
		defer close(in.done)
		in.err = in.run(pctx, ictx)
	}()
}

// Stop stops polling, inserts and commits the batch being filled (retrying
// while ClickHouse is away, until ctx ends), leaves the group and closes
// the client. Rows it could not insert are not committed: the group reads
// them again. It returns an error saying so.
func (in *Ingest) Stop(ctx context.Context) error {
	in.stopOnce.Do(func() {
		in.stop()
		select {
		case <-in.done:
		case <-ctx.Done(): // give up the retries of the last batch
			in.abort()
			<-in.done
		}
		in.abort()
		in.cl.AllowRebalance() // leaving the group waits for it otherwise
		in.cl.Close()
	})
	return in.err
}

// run is the loop: poll, add each message to the batch, flush when full
// or due; at the end flush within Stop's context. Polls end with pctx,
// inserts and commits with ictx.
func (in *Ingest) run(ctx, ictx context.Context) error {
	b := newBatch(in.cfg.BatchBytes)
	split := false // a batch was inserted within this poll's records
	for ctx.Err() == nil {
		wait := in.cfg.BatchDelay
		if b.rows > 0 {
			wait = time.Until(b.first.Add(in.cfg.BatchDelay))
		}
		if wait > 0 {
			pctx, cancel := context.WithTimeout(ctx, wait)
			fs := in.cl.PollRecords(pctx, pollRecords)
			cancel()
			fs.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					in.st.fetchErrors.Add(1)
					in.lg.printf("fetch", "weir ingest: fetching %s partition %d: %v (franz-go retries)", topic, p, err)
				}
			})
			recs := fs.Records()
			if err := in.ready(ictx, recs); err != nil {
				return in.end(&loadError{err}, b)
			}
			for _, r := range recs {
				if b.rows > 0 && len(b.buf)+len(r.Value) > in.cfg.BatchBytes { // rows are checked at the poll's end: fewer splits
					if err := in.flush(ictx, b); err != nil {
						return in.end(err, b)
					}
					split = true
				}
				in.add(b, r)
			}
		}
		// A batch split within a poll is inserted whole by the poll's end:
		// partitions move only when no batch is held (AllowRebalance), so
		// no rows of a partition that moved are inserted after its new
		// owner read the marks.
		due := b.rows > 0 && (split || b.rows >= in.cfg.BatchRows || len(b.buf) >= in.cfg.BatchBytes || !time.Now().Before(b.first.Add(in.cfg.BatchDelay)))
		split = false
		if due || (b.rows == 0 && len(b.last) > 0) { // skipped messages alone: commit them too
			if err := in.flush(ictx, b); err != nil {
				return in.end(err, b)
			}
		}
		if b.rows == 0 && len(b.last) == 0 {
			in.cl.AllowRebalance()
		}
	}
	// Stopping: the last batch, retried until Stop's context ends.
	return in.end(in.flush(ictx, b), b)
}

// end says what an ending loop leaves uncommitted.
func (in *Ingest) end(err error, b *batch) error {
	if err == nil {
		return nil
	}
	var le *loadError
	if errors.As(err, &le) {
		err = fmt.Errorf("weir ingest: could not read the offsets already inserted from %s.%s at %s (%w): the messages of the partitions "+
			"assigned since were not taken, nor committed: the next weir ingest of group %s reads them", in.cfg.Database, clickhouse.TableOffsets, in.cfg.URL, le.err, in.cfg.Group)
		if b.rows == 0 {
			return err
		}
		return errors.Join(err, fmt.Errorf("weir ingest: %d rows held were not inserted either; their offsets were not committed", b.rows))
	}
	var ue *unrecordedError
	if errors.As(err, &ue) {
		return fmt.Errorf("weir ingest: %d rows were inserted but their offsets not recorded in %s.%s (%w) nor committed: "+
			"the next weir ingest of group %s reads them again and may insert them twice", ue.rows, in.cfg.Database, clickhouse.TableOffsets, ue.err, in.cfg.Group)
	}
	if b.rows > 0 {
		return fmt.Errorf("weir ingest: %d rows were not inserted (%w); their offsets were not committed: "+
			"the next weir ingest of group %s reads them again", b.rows, err, in.cfg.Group)
	}
	return nil
}

// loadError is the marks' load given up (Stop's time ran out).
type loadError struct{ err error }

func (e *loadError) Error() string { return e.err.Error() }
func (e *loadError) Unwrap() error { return e.err }

// unrecordedError is a flush that inserted its rows but ended (Stop's
// time ran out) before their marks were recorded.
type unrecordedError struct {
	rows int
	err  error
}

func (e *unrecordedError) Error() string { return e.err.Error() }
func (e *unrecordedError) Unwrap() error { return e.err }
