// Package sink defines where records go once they leave the flow table:
// the Sink interface, Multi (synchronous fan-out) and Queue (a bounded
// queue per sink for live sources). The sinks implement Sink where they
// live: sink/ipfix (IPFIX export), sink/kafka (Kafka, which ClickHouse
// ingests, see internal/clickhouse), internal/store (the flow store),
// internal/format (JSON lines and the table) and internal/enrich (a sink
// that enriches and passes on); Func makes one of a function.
package sink

import (
	"errors"

	"github.com/weir-dev/weir/internal/flow"
)

// Sink consumes batches of records. Write must not keep recs or any of its
// records after it returns: the caller reuses the batch.
type Sink interface {
	Write(recs []flow.Record) error
	// Close flushes anything buffered and releases the sink.
	Close() error
}

// Func is a Sink of a function: Write calls it, Close does nothing.
type Func func(recs []flow.Record) error

// Write calls f.
func (f Func) Write(recs []flow.Record) error { return f(recs) }

// Close does nothing.
func (f Func) Close() error { return nil }

// Multi writes every batch to each sink in turn and returns all their
// errors joined. It is the synchronous fan-out used for file replay, where
// blocking is the right answer to a slow sink (nothing may be dropped).
type Multi []Sink

// Write hands recs to every sink.
func (m Multi) Write(recs []flow.Record) error {
	var errs []error
	for _, s := range m {
		if err := s.Write(recs); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close closes every sink.
func (m Multi) Close() error {
	var errs []error
	for _, s := range m {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
