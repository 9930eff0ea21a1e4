package ingest

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-dev/weir/internal/metrics"
)

// failCommits makes the cluster refuse every offset commit with
// IllegalGeneration (what a consumer that lost its membership hears)
// while fail holds.
func failCommits(c *kfake.Cluster, fail *atomic.Bool) {
	c.ControlKey(kmsg.OffsetCommit.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !fail.Load() {
			return nil, nil, false
		}
		req := kr.(*kmsg.OffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Version = req.Version
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.IllegalGeneration.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
}

// TestReplay: a consumer inserts every record but none of its commits
// succeeds; the group then reads them all again and inserts none twice:
// each message it had taken is skipped as replayed (the marks read from
// ClickHouse), its offset committed, and new records go in once.
func TestReplay(t *testing.T) {
	c := newCluster(t)
	var fail atomic.Bool
	fail.Store(true)
	failCommits(c, &fail)
	addr := c.ListenAddrs()[0]
	ch, chURL := newFakeCH(t)
	produce(t, addr, "", records(0, 3000))

	a := ingestUntil(t, addr, ch, chURL, "g", 1000, 3000)
	stop(t, a)
	sa := a.Stats()
	if sa.Commits != 0 || sa.CommitErrors == 0 || sa.Rows != 3000 {
		t.Fatalf("first ingest: %+v", sa)
	}

	fail.Store(false)
	b := newIngest(t, addr, chURL, "g", 1000)
	b.Start(context.Background())
	waitFor(t, "the replays", func() bool { return b.Stats().Replayed >= sa.Messages })
	produce(t, addr, "", records(3000, 500))
	waitFor(t, "3,500 records", func() bool { n, _ := ch.count(); return n >= 3500 })
	stop(t, b)
	if n, total := ch.count(); n != 3500 || total != 3500 {
		t.Fatalf("%d records inserted, %d times in all; want 3500 once each", n, total)
	}
	if sb := b.Stats(); sb.Replayed != sa.Messages || sb.Rows != 500 || sb.Commits == 0 || sb.OffsetLoads == 0 {
		t.Fatalf("second ingest: %+v; want %d messages replayed", sb, sa.Messages)
	}
	reg := metrics.NewRegistry()
	if err := reg.Register(b.Collector()); err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if _, err := reg.WriteTo(&text); err != nil {
		t.Fatal(err)
	}
	m, err := metrics.ParseText(&text)
	if err != nil {
		t.Fatal(err)
	}
	if m["weir_ingest_replayed_messages_total"] != float64(sa.Messages) || m["weir_ingest_offsets_loads_total"] == 0 ||
		m[`weir_ingest_offsets_errors_total{kind="refused"}`] != 0 {
		t.Errorf("metrics: %v", m)
	}

	// Its commits took: a third ingest of the group replays nothing.
	d := newIngest(t, addr, chURL, "g", 1000)
	d.Start(context.Background())
	produce(t, addr, "", records(3500, 10))
	waitFor(t, "3,510 records", func() bool { n, _ := ch.count(); return n >= 3510 })
	stop(t, d)
	if n, total := ch.count(); n != 3510 || total != 3510 || d.Stats().Replayed != 0 {
		t.Fatalf("third ingest: %d records, %d in all, %+v", n, total, d.Stats())
	}
}

// TestMarksOnAssign: a second consumer joins the group after the first
// inserted every record without a commit: the partitions it is assigned
// it reads from their start, and its marks, read from ClickHouse at the
// assignment, make it skip every one of those records. When it leaves
// after inserting uncommitted records, the first reads the marks of the
// partitions it gets back again and skips those. Every record is in
// ClickHouse exactly once.
func TestMarksOnAssign(t *testing.T) {
	c := newCluster(t)
	var fail atomic.Bool
	fail.Store(true)
	failCommits(c, &fail)
	addr := c.ListenAddrs()[0]
	ch, chURL := newFakeCH(t)
	produce(t, addr, "", records(0, 2000))

	a := ingestUntil(t, addr, ch, chURL, "shared", 500, 2000)
	b := newIngest(t, addr, chURL, "shared", 500)
	b.Start(context.Background())
	waitFor(t, "the second consumer's replays", func() bool { return b.Stats().Replayed > 0 })
	if st := b.Stats(); st.Rows != 0 || st.OffsetLoads == 0 {
		t.Fatalf("second consumer: %+v", st)
	}
	fail.Store(false)
	sent := 2000
	for deadline := time.Now().Add(60 * time.Second); b.Stats().Rows == 0; sent += 200 {
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s the second consumer inserted nothing: %+v", b.Stats())
		}
		produce(t, addr, "", records(sent, 200))
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, "every record", func() bool { n, _ := ch.count(); return n >= sent })

	// Commits fail again while both insert; the second leaves: the first
	// is assigned its partitions back, reads their marks again (the
	// second's) and skips what the second inserted without a commit.
	fail.Store(true)
	before := b.Stats().Rows
	produce(t, addr, "", records(sent, 1000))
	sent += 1000
	waitFor(t, "every record", func() bool { n, _ := ch.count(); return n >= sent })
	stop(t, b)
	if b.Stats().Rows > before {
		waitFor(t, "the first consumer's replays", func() bool { return a.Stats().Replayed > 0 })
	}
	fail.Store(false)
	produce(t, addr, "", records(sent, 200))
	sent += 200
	waitFor(t, "every record", func() bool { n, _ := ch.count(); return n >= sent })
	stop(t, a)
	if n, total := ch.count(); n != sent || total != sent {
		t.Fatalf("%d of %d records inserted, %d times in all", n, sent, total)
	}
	if sa, sb := a.Stats(), b.Stats(); sa.Rows+sb.Rows != uint64(sent) {
		t.Fatalf("rows %d + %d, want %d", sa.Rows, sb.Rows, sent)
	}
}

// TestMarksWrite: nothing is committed before the marks of an insert are
// recorded: their write is retried while refused, and a stop that gives
// up on it says that the rows inserted may come again.
func TestMarksWrite(t *testing.T) {
	c := newCluster(t)
	addr := c.ListenAddrs()[0]
	produce(t, addr, "", records(0, 1000))

	ch, chURL := newFakeCH(t)
	ch.noMarks.Store(3)
	in := newIngest(t, addr, chURL, "g", 100000)
	in.Start(context.Background())
	waitFor(t, "1,000 records committed", func() bool { n, _ := ch.count(); return n >= 1000 && in.Stats().Commits > 0 })
	stop(t, in)
	if n, total := ch.count(); n != 1000 || total != 1000 {
		t.Fatalf("%d records, %d in all", n, total)
	}
	if st := in.Stats(); st.OffsetErrors["refused"] != 3 {
		t.Fatalf("stats %+v: want 3 refused writes of the marks", st)
	}

	produce(t, addr, "", records(1000, 500))
	ch.noMarks.Store(1 << 30)
	in = newIngest(t, addr, chURL, "g", 100000)
	in.Start(context.Background())
	waitFor(t, "refused writes of the marks", func() bool { return in.Stats().OffsetErrors["refused"] >= 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err := in.Stop(ctx)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "offsets not recorded") {
		t.Fatalf("Stop while the marks cannot be written: %v", err)
	}
	if st := in.Stats(); st.Commits != 0 || st.Rows == 0 {
		t.Fatalf("committed before the marks were written, or inserted nothing: %+v", st)
	}
}
