package ingest

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-dev/weir/internal/clickhouse"
)

// marks are, per partition of the topic, the highest offset known
// inserted into ClickHouse (its watermark): from this consumer's own
// inserts, and read from ClickHouse's offsets table
// (clickhouse.TableOffsets) when partitions are assigned to it. A message
// at or below its partition's mark is a replay (the group reading again
// rows whose commit was lost): skipped, counted, committed.
//
// Only the run loop touches known; assigned is filled by franz-go's
// OnPartitionsAssigned (serialised with polls by BlockRebalanceOnPoll:
// it runs before the new partitions' records are fetched).
type marks struct {
	known map[int32]int64 // partition → the mark; -1: nothing inserted yet
	topic string          // the marks' topic key (topicKey), set by load

	mu       sync.Mutex
	assigned []int32 // assigned since the loop last looked: their marks are reloaded

	features *clickhouse.Features // the server's, probed at the first load
	up       map[int32]int64      // the marks a flush records (reused)
	buf      bytes.Buffer         // RowBinary of the recorded marks (reused)
}

// onAssigned is franz-go's OnPartitionsAssigned.
func (in *Ingest) onAssigned(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	in.marks.mu.Lock()
	in.marks.assigned = append(in.marks.assigned, parts[in.cfg.Kafka.Topic]...)
	in.marks.mu.Unlock()
}

// ready makes the marks of every partition in recs known: partitions
// assigned since the last look are forgotten first, then unknown ones are
// read from ClickHouse, retried with backoff while it is away or refuses,
// until ctx ends (then the error: no record of an unknown mark is added).
func (in *Ingest) ready(ctx context.Context, recs []*kgo.Record) error {
	m := &in.marks
	m.mu.Lock()
	for _, p := range m.assigned {
		delete(m.known, p)
	}
	m.assigned = m.assigned[:0]
	m.mu.Unlock()
	missing := false
	for _, r := range recs {
		if _, ok := m.known[r.Partition]; !ok {
			missing = true
			break
		}
	}
	if !missing {
		return nil
	}
	wait := retryMin
	for {
		err := in.load(ctx, recs)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, errTopicID) { // counted as a fetch error
			in.countCH(&in.st.markErrors, err)
		}
		in.lg.printf("marks", "weir ingest: reading the offsets already inserted (%s.%s) from %s: %v; retrying in %v "+
			"(weir clickhouse setup --ingest weir creates the table; nothing of the partitions assigned is inserted until this succeeds)",
			in.cfg.Database, clickhouse.TableOffsets, in.cfg.URL, err, wait)
		if !sleep(ctx, wait) {
			return ctx.Err()
		}
		wait = min(2*wait, retryMax)
	}
}

// load reads the group's marks of the topic and sets the unknown ones of
// recs' partitions (-1 where ClickHouse has none).
func (in *Ingest) load(ctx context.Context, recs []*kgo.Record) error {
	m := &in.marks
	ctx, cancel := context.WithTimeout(ctx, insertTimeout)
	defer cancel()
	if m.features == nil {
		f, err := clickhouse.Probe(ctx, in.cfg.ClickHouse)
		if err != nil {
			return err
		}
		m.features = &f
	}
	key, err := in.topicKey(ctx)
	if err != nil {
		return err
	}
	if key != m.topic {
		if m.topic != "" {
			in.lg.printf("topic-id", "weir ingest: topic %s is not the one whose offsets were marked (%s, now %s): "+
				"it was deleted and created again; its offsets start afresh", in.cfg.Kafka.Topic, m.topic, key)
		}
		clear(m.known) // another topic's marks
		m.topic = key
	}
	got, err := clickhouse.LoadOffsets(ctx, in.cfg.ClickHouse, *m.features, in.cfg.Database, in.cfg.Group, key)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if _, ok := m.known[r.Partition]; !ok {
			o, ok := got[r.Partition]
			if !ok {
				o = -1
			}
			m.known[r.Partition] = o
		}
	}
	in.st.markLoads.Add(1)
	return nil
}

// topicKey is the topic's name and, where the broker has topic IDs (Kafka
// 2.8 and later), "@" and its ID in hex: the marks' key, so the marks of a
// topic deleted and created again under the same name (offsets from 0
// again) are not taken for the new one's ('@' is not allowed in topic
// names). A failed metadata request is counted as a fetch error.
func (in *Ingest) topicKey(ctx context.Context) (string, error) {
	name := in.cfg.Kafka.Topic
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(name)
	req.Topics = append(req.Topics, t)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, in.cl)
	if err == nil {
		err = fmt.Errorf("the broker did not describe it")
		for _, rt := range resp.Topics {
			if rt.Topic == nil || *rt.Topic != name {
				continue
			}
			if err = kerr.ErrorForCode(rt.ErrorCode); err == nil {
				if rt.TopicID == ([16]byte{}) {
					return name, nil
				}
				return name + "@" + hex.EncodeToString(rt.TopicID[:]), nil
			}
		}
	}
	in.st.fetchErrors.Add(1)
	return "", fmt.Errorf("%w %s from Kafka: %w", errTopicID, name, err)
}

// errTopicID is a failed read of the topic's ID.
var errTopicID = errors.New("weir ingest: reading the ID of topic")

// replayed reports whether r is at or below its partition's mark.
func (in *Ingest) replayed(r *kgo.Record) bool {
	o, ok := in.marks.known[r.Partition]
	return ok && r.Offset <= o
}

// record raises the marks to the batch's last offsets (its rows are in
// ClickHouse now) and writes the raised ones to ClickHouse, retrying
// until ctx ends: only then may the batch be committed to Kafka.
func (in *Ingest) record(ctx context.Context, b *batch) error {
	m := &in.marks
	clear(m.up)
	if m.up == nil {
		m.up = map[int32]int64{}
	}
	for p, r := range b.last {
		if o, ok := m.known[p]; !ok || r.Offset > o {
			m.known[p] = r.Offset
			m.up[p] = r.Offset
		}
	}
	wait := retryMin
	for {
		ictx, cancel := context.WithTimeout(ctx, insertTimeout)
		err := clickhouse.RecordOffsets(ictx, in.cfg.ClickHouse, in.cfg.Database, in.cfg.Group, m.topic, m.up, &m.buf)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		in.countCH(&in.st.markErrors, err)
		in.lg.printf("marks-write", "weir ingest: recording the offsets inserted in %s.%s at %s: %v; retrying in %v (nothing is committed until it succeeds)",
			in.cfg.Database, clickhouse.TableOffsets, in.cfg.URL, err, wait)
		if !sleep(ctx, wait) {
			return ctx.Err()
		}
		wait = min(2*wait, retryMax)
	}
}

// countCH counts a failed ClickHouse request by kind.
func (in *Ingest) countCH(c *[numInsert]atomic.Uint64, err error) {
	kind := insertUnreachable
	if errors.Is(err, clickhouse.ErrServer) {
		kind = insertRefused
	}
	c[kind].Add(1)
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
