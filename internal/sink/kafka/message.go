package kafka

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/wire"
)

// ErrMessage wraps every message Rows cannot read.
var ErrMessage = errors.New("kafka: not a weir message")

// Rows splits a message of weir's topic into its records: fn is called
// with each in order (rec is the same record each time, overwritten). It
// checks the weir.schema header (wire.ParseSchema) and that the value
// holds exactly the rows the header names, each whole; it returns how
// many rows it read.
func Rows(r *kgo.Record, rec *flow.Record, fn func(*flow.Record)) (int, error) {
	want := -1
	for _, h := range r.Headers {
		if h.Key != wire.SchemaHeader {
			continue
		}
		if want >= 0 {
			return 0, fmt.Errorf("%w: two %s headers", ErrMessage, wire.SchemaHeader)
		}
		n, err := wire.ParseSchema(h.Value)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrMessage, err)
		}
		want = n
	}
	if want < 0 {
		return 0, fmt.Errorf("%w: no %s header", ErrMessage, wire.SchemaHeader)
	}
	if err := wire.CheckRows(r.Value, want); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrMessage, err)
	}
	b := r.Value
	for range want {
		rest, err := wire.Decode(b, rec)
		if err != nil { // CheckRows passed: cannot happen
			return 0, fmt.Errorf("%w: %w", ErrMessage, err)
		}
		b = rest
		fn(rec)
	}
	return want, nil
}
