// Package kafka is the Kafka sink: it sends records as internal/wire's
// RowBinary rows, keyed by a hash of the flow's endpoints so that a flow's
// records land in one partition, batched and compressed by franz-go. With
// ?format=packed (the default, for weir ingest) a Kafka message holds up
// to 256 rows of one of Buckets flow buckets (pack.go); with ?format=row
// it holds one row, what ClickHouse's Kafka engine reads without loss.
//
// Memory is bounded: at most Config.BufferRecords records (and BufferBytes
// bytes) wait for the broker. While the broker is away they are kept and
// retried, so a restart loses nothing the buffer holds; what does not fit
// is dropped and counted (buffer_full), as are records the broker refuses
// (produce_error, by Kafka error) and records still buffered when Close's
// timeout runs out (shutdown). Write never blocks.
package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/wire"
)

// DropReason says why a record was not delivered.
type DropReason uint8

// Drop reasons, the label values of weir_kafka_dropped_records_total.
const (
	DropBufferFull   DropReason = iota // the buffer held BufferRecords records or BufferBytes bytes
	DropProduceError                   // the broker refused the record, or the client gave it up (Stats.Errors says why)
	DropShutdown                       // still buffered when Close's timeout ran out
	numDropReasons
)

var dropNames = [numDropReasons]string{"buffer_full", "produce_error", "shutdown"}

// String is the reason's label value.
func (r DropReason) String() string { return dropNames[r] }

// Stats are a Sink's counters.
type Stats struct {
	Records  uint64 // handed to Write
	Produced uint64 // acknowledged by the broker (acks=none: sent)
	Messages uint64 // Kafka messages acknowledged, holding the Produced records
	Bytes    uint64 // row bytes of the produced records
	Buffered int    // waiting for the broker now
	Dropped  [numDropReasons]uint64
	// Errors counts produce errors by name: the Kafka error
	// (MESSAGE_TOO_LARGE, TOPIC_AUTHORIZATION_FAILED, …) or the client's
	// (RECORD_TIMEOUT, RECORD_RETRIES, OTHER).
	Errors map[string]uint64
}

// Sink produces records to a Kafka topic. Write and Close are safe for
// concurrent use with Stats; Write is safe for concurrent use.
type Sink struct {
	cfg     *Config
	cl      *kgo.Client
	headers []kgo.RecordHeader
	promise func(*kgo.Record, error) // one method value, so producing allocates no closure
	// packPromise is the packed messages' (pack.go).
	packPromise func(*kgo.Record, error)
	pk          packer

	mu    sync.Mutex
	free  []*slot // slots not in flight
	slots int     // slots made

	records, produced, messages, bytes, inflight atomic.Uint64
	dropped                                      [numDropReasons]atomic.Uint64
	errMu                                        sync.Mutex
	errs                                         map[string]uint64
	closed                                       atomic.Bool
	closeOnce                                    sync.Once
	closeErr                                     error
}

// slot is one record in flight: the kgo.Record, its row and key bytes,
// reused when the promise returns it, so producing allocates nothing per
// record once the slots exist.
type slot struct {
	rec kgo.Record
	buf []byte
	key [8]byte
	ctx slotCtx
}

// slotCtx is a record's Context: it never ends, and leads the promise back
// to the record's slot.
type slotCtx struct {
	context.Context
	s *slot
}

// maxKeptRow is the largest row buffer a slot keeps when it returns: a slot
// that once held a huge row gives that memory back.
const maxKeptRow = 1024

// New connects nothing yet (franz-go dials on the first produce) but checks
// the configuration and builds the client.
func New(cfg *Config) (*Sink, error) {
	maxBytes := cfg.BufferBytes
	if cfg.Packed() {
		// The packed sink bounds its rows and bytes itself (pack.go);
		// franz-go's bounds, on messages, are a backstop above them.
		maxBytes = 2*cfg.BufferBytes + Buckets*maxPackCap
	}
	opts := append(ConnOpts(cfg),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.MaxBufferedRecords(cfg.BufferRecords),
		kgo.MaxBufferedBytes(maxBytes),
		kgo.ProducerLinger(cfg.Linger),
		kgo.UnknownTopicRetries(-1),
		kgo.RetryBackoffFn(func(n int) time.Duration { return min(time.Duration(n)*100*time.Millisecond, 2*time.Second) }),
	)
	switch cfg.Compression {
	case "zstd":
		// zstd's fastest level: BenchmarkBroker measured its default
		// level's compression as the largest share of the sender's CPU.
		opts = append(opts, kgo.ProducerBatchCompression(kgo.ZstdCompression().WithLevel(int(zstd.SpeedFastest))))
	case "lz4":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	case "snappy":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	case "gzip":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	default:
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	}
	switch cfg.Acks {
	case "leader":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "none":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	s := &Sink{cfg: cfg, cl: cl, errs: map[string]uint64{},
		headers: []kgo.RecordHeader{{Key: wire.SchemaHeader, Value: []byte(wire.RowSchema)}}}
	s.promise, s.packPromise = s.done, s.packDone
	s.pk.timer = time.AfterFunc(time.Hour, s.lingered)
	s.pk.timer.Stop()
	return s, nil
}

// ConnOpts are the options of every client of cfg: brokers, identity, TLS
// and SASL.
func ConnOpts(cfg *Config) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.ClientID(cfg.ClientID)}
	if cfg.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(cfg.TLS.Clone()))
	}
	switch cfg.SASL {
	case "plain":
		opts = append(opts, kgo.SASL(plain.Auth{User: cfg.User, Pass: cfg.Password}.AsMechanism()))
	case "scram-sha-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: cfg.User, Pass: cfg.Password}.AsSha256Mechanism()))
	case "scram-sha-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: cfg.User, Pass: cfg.Password}.AsSha512Mechanism()))
	}
	return opts
}

// URL is the destination as configured.
func (s *Sink) URL() string { return s.cfg.URL }

// Write hands recs to the producer and returns at once; records that do
// not fit the buffer are dropped and counted. It returns an error only
// after Close.
func (s *Sink) Write(recs []flow.Record) error {
	if s.cfg.Packed() {
		return s.writePacked(recs)
	}
	if s.closed.Load() {
		s.dropped[DropShutdown].Add(uint64(len(recs)))
		return errClosed
	}
	s.records.Add(uint64(len(recs)))
	now := time.Now() // one clock read a call: franz-go would read it for every record without a Timestamp
	for i := range recs {
		sl := s.get()
		if sl == nil {
			s.dropped[DropBufferFull].Add(uint64(len(recs) - i))
			return nil
		}
		r := &recs[i]
		sl.buf = wire.Append(sl.buf[:0], r)
		binary.BigEndian.PutUint64(sl.key[:], KeyHash(&r.Key))
		sl.rec = kgo.Record{Topic: s.cfg.Topic, Key: sl.key[:], Value: sl.buf, Headers: s.headers, Timestamp: now, Context: &sl.ctx}
		s.inflight.Add(1)
		s.cl.TryProduce(context.Background(), &sl.rec, s.promise)
	}
	return nil
}

var errClosed = errors.New("kafka: sink closed")

// get takes a free slot, making one while fewer than BufferRecords exist;
// nil when all are in flight.
func (s *Sink) get() *slot {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.free); n > 0 {
		sl := s.free[n-1]
		s.free = s.free[:n-1]
		return sl
	}
	if s.slots >= s.cfg.BufferRecords {
		return nil
	}
	s.slots++
	sl := &slot{buf: make([]byte, 0, 256)}
	sl.ctx = slotCtx{Context: context.Background(), s: sl}
	return sl
}

// done is every record's promise: it counts the outcome and frees the slot.
func (s *Sink) done(r *kgo.Record, err error) {
	sl := r.Context.(*slotCtx).s
	if err == nil {
		s.produced.Add(1)
		s.messages.Add(1)
		s.bytes.Add(uint64(len(r.Value)))
	} else {
		s.fail(err, 1)
	}
	if cap(sl.buf) > maxKeptRow {
		sl.buf = make([]byte, 0, 256)
	}
	sl.rec = kgo.Record{}
	s.inflight.Add(^uint64(0))
	s.mu.Lock()
	s.free = append(s.free, sl)
	s.mu.Unlock()
}

// fail counts the rows of a message the producer gave up on.
func (s *Sink) fail(err error, rows uint64) {
	switch {
	case errors.Is(err, kgo.ErrMaxBuffered):
		s.dropped[DropBufferFull].Add(rows)
		return
	case errors.Is(err, kgo.ErrClientClosed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		s.dropped[DropShutdown].Add(rows)
		return
	}
	s.dropped[DropProduceError].Add(rows)
	name := "OTHER"
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		name = ke.Message
	case errors.Is(err, kgo.ErrRecordTimeout):
		name = "RECORD_TIMEOUT"
	case errors.Is(err, kgo.ErrRecordRetries):
		name = "RECORD_RETRIES"
	}
	s.errMu.Lock()
	s.errs[name] += rows // bounded: Kafka's error names and the three above
	s.errMu.Unlock()
}

// Flush sends the messages being filled and waits until every buffered
// record is acknowledged or ctx ends.
func (s *Sink) Flush(ctx context.Context) error {
	s.sendAll(false)
	return s.cl.Flush(ctx)
}

// Close waits up to the URL's close-timeout for the buffer to drain, then
// closes the client: records still buffered are dropped and counted
// (shutdown). It returns an error when records were dropped at shutdown.
func (s *Sink) Close() error {
	s.closeOnce.Do(func() {
		s.sendAll(true)
		s.closed.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CloseTimeout)
		flushErr := s.cl.Flush(ctx)
		cancel()
		s.cl.Close() // fails what is left with ErrClientClosed: their promises count them
		for i := 0; s.inflight.Load() != 0 && i < 100; i++ {
			time.Sleep(10 * time.Millisecond) // bounded: promises of failed records may still be running
		}
		if flushErr != nil {
			s.closeErr = errors.New("kafka: " + s.cfg.Topic + ": the broker did not take every buffered record within close-timeout " +
				s.cfg.CloseTimeout.String() + ": the rest were dropped (counted as shutdown)")
		}
	})
	return s.closeErr
}

// Stats returns the sink's counters.
func (s *Sink) Stats() Stats {
	st := Stats{Records: s.records.Load(), Produced: s.produced.Load(), Messages: s.messages.Load(), Bytes: s.bytes.Load(),
		Buffered: int(s.inflight.Load()), Errors: map[string]uint64{}}
	for i := range st.Dropped {
		st.Dropped[i] = s.dropped[i].Load()
	}
	s.errMu.Lock()
	for k, v := range s.errs {
		st.Errors[k] = v
	}
	s.errMu.Unlock()
	return st
}

// KeyHash is the partitioning key of a flow: a hash of its two endpoints
// (address and port) taken in a fixed order, and its protocol, so that
// every record of a flow, in either orientation, gets the same key.
func KeyHash(k *flow.Key) uint64 {
	a, b := k.SrcAddr, k.DstAddr
	pa, pb := k.SrcPort, k.DstPort
	if less(&b, pb, &a, pa) {
		a, b, pa, pb = b, a, pb, pa
	}
	h := uint64(k.Proto)<<32 | uint64(pa)<<16 | uint64(pb)
	for _, w := range [4]uint64{binary.LittleEndian.Uint64(a[:8]), binary.LittleEndian.Uint64(a[8:]),
		binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])} {
		h = (h ^ w) * 0x9e3779b97f4a7c15 // multiply-xor mixing (splitmix64's constants)
		h ^= h >> 31
	}
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>29
}

func less(a *[16]byte, pa uint16, b *[16]byte, pb uint16) bool {
	if c := bytes.Compare(a[:], b[:]); c != 0 {
		return c < 0
	}
	return pa < pb
}

// ErrNoTopic is returned by Check when the topic does not exist.
var ErrNoTopic = errors.New("kafka: topic does not exist")

// Check asks the brokers for the topic's metadata: a broker that cannot be
// reached or a topic that does not exist is an error that says what to do.
// Records sent to a missing topic wait in the buffer (they are never
// failed, so that a restarting broker loses none), so an agent checks at
// start.
func (s *Sink) Check(ctx context.Context) error {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(s.cfg.Topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return fmt.Errorf("kafka: %s: no broker answered: %w", strings.Join(s.cfg.Brokers, ","), err)
	}
	for _, rt := range resp.Topics {
		if rt.Topic != nil && *rt.Topic == s.cfg.Topic {
			if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
				if errors.Is(err, kerr.UnknownTopicOrPartition) {
					return fmt.Errorf("%w: %s: create it (weir clickhouse setup --kafka creates it)", ErrNoTopic, s.cfg.Topic)
				}
				return fmt.Errorf("kafka: topic %s: %w", s.cfg.Topic, err)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNoTopic, s.cfg.Topic)
}

// EnsureTopic creates topic on the brokers of cfg with the given
// partitions and replication factor, unless it exists. It reports whether
// it created the topic.
func EnsureTopic(ctx context.Context, cfg *Config, partitions int32, replication int16) (bool, error) {
	cl, err := kgo.NewClient(ConnOpts(cfg)...)
	if err != nil {
		return false, err
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = cfg.Topic, partitions, replication
	req.Topics = append(req.Topics, t)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return false, fmt.Errorf("kafka: creating topic %s: %w", cfg.Topic, err)
	}
	for _, rt := range resp.Topics {
		err := kerr.ErrorForCode(rt.ErrorCode)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, kerr.TopicAlreadyExists):
			return false, nil
		default:
			msg := ""
			if rt.ErrorMessage != nil {
				msg = ": " + *rt.ErrorMessage
			}
			return false, fmt.Errorf("kafka: creating topic %s: %w%s", cfg.Topic, err, msg)
		}
	}
	return false, fmt.Errorf("kafka: creating topic %s: no answer for it", cfg.Topic)
}
