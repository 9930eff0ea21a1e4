package kafka

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/wire"
)

// messages reads the topic's messages until it has rows rows in them (or
// timeout passes).
func messages(t *testing.T, addr string, rows int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []*kgo.Record
	var rec flow.Record
	for n := 0; n < rows && ctx.Err() == nil; {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			k, err := Rows(r, &rec, func(*flow.Record) {})
			if err != nil {
				t.Fatalf("message at %d/%d: %v", r.Partition, r.Offset, err)
			}
			n += k
			out = append(out, r)
		})
	}
	return out
}

// TestPacking: records written faster than the linger are packed many to
// a message: every message holds only rows of its key's bucket, at most
// packRows of them and packBytes plus one row, its header names its row
// count, and the messages are far fewer than the records, each record in
// one exactly once (consume checks).
func TestPacking(t *testing.T) {
	c := newFake(t)
	addr := c.ListenAddrs()[0]
	s := newSink(t, addr, "?linger=5s")
	const n, flows = 50000, 2048
	recs := records(n, flows, "node-a")
	for i := 0; i < n; i += 1000 {
		s.Write(recs[i : i+1000])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := messages(t, addr, n, 30*time.Second)
	row := len(wire.Append(nil, &recs[0]))
	most := 0
	for _, m := range msgs {
		var rec flow.Record
		k, _ := Rows(m, &rec, func(*flow.Record) {})
		most = max(most, k)
		if k > packRows || len(m.Value) >= packBytes+2*row {
			t.Errorf("message of %d rows, %d bytes (rows of %d bytes)", k, len(m.Value), row)
		}
	}
	t.Logf("%d records in %d messages, at most %d rows in one (%d-byte rows)", n, len(msgs), most, row)
	if len(msgs) > n/50 || most < packBytes/row {
		t.Errorf("%d records in %d messages, at most %d rows in one", n, len(msgs), most)
	}
	if got := consume(t, addr, n, 30*time.Second); len(got) != n {
		t.Fatalf("%d of %d records arrived", len(got), n)
	}
	if st := s.Stats(); st.Produced != n || st.Messages != uint64(len(msgs)) || st.Buffered != 0 || s.pk.held.Load() != 0 {
		t.Errorf("stats %+v, %d bytes held", st, s.pk.held.Load())
	}
}

// TestLinger: a few records, no Flush: the linger sends their messages.
func TestLinger(t *testing.T) {
	c := newFake(t)
	addr := c.ListenAddrs()[0]
	s := newSink(t, addr, "?linger=50ms")
	s.Write(records(10, 10, ""))
	if got := consume(t, addr, 10, 30*time.Second); len(got) != 10 {
		t.Fatalf("%d of 10 records arrived without a Flush", len(got))
	}
}

// TestBufferBytes: with the broker away, buffer-bytes bounds the memory
// of the messages waiting (the capacity of their buffers, over by at most
// one buffer's growth); the rows past it are dropped and counted one by
// one, and the buffered ones arrive once the broker is back.
func TestBufferBytes(t *testing.T) {
	c := newFake(t)
	addr := c.ListenAddrs()[0]
	up, _ := down(c)
	s := newSink(t, addr, "?buffer-bytes=65536&linger=1ms")
	const n = 20000
	recs := records(n, 1000, "")
	for i := 0; i < n; i += 100 {
		s.Write(recs[i : i+100])
		time.Sleep(100 * time.Microsecond)
	}
	st := s.Stats()
	if h := s.pk.held.Load(); h > 65536+maxPackCap {
		t.Errorf("%d bytes held, buffer-bytes 65536", h)
	}
	if st.Records != n || st.Dropped[DropBufferFull] == 0 || uint64(st.Buffered)+st.Dropped[DropBufferFull] != n {
		t.Fatalf("stats %+v", st)
	}
	up()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := consume(t, addr, st.Buffered, 30*time.Second); len(got) != st.Buffered {
		t.Fatalf("%d of %d buffered records arrived", len(got), st.Buffered)
	}
	if st2 := s.Stats(); st2.Produced != uint64(st.Buffered) || st2.Produced+st2.Dropped[DropBufferFull] != n || s.pk.held.Load() != 0 {
		t.Errorf("stats %+v, %d bytes held", st2, s.pk.held.Load())
	}
}

// message is a message of the given rows as the sink makes it.
func message(rows []flow.Record, header string) *kgo.Record {
	var v []byte
	for i := range rows {
		v = wire.Append(v, &rows[i])
	}
	return &kgo.Record{Value: v, Headers: []kgo.RecordHeader{{Key: wire.SchemaHeader, Value: []byte(header)}}}
}

// TestRows: Rows reads back every row of a message, and an older agent's
// one-row message, and refuses a message whose header is missing or names
// another count, and one with a cut or trailing row.
func TestRows(t *testing.T) {
	recs := records(5, 5, "node-a")
	var rec flow.Record
	var got []uint64
	n, err := Rows(message(recs, "rowbinary/1;rows=5"), &rec, func(r *flow.Record) { got = append(got, r.Packets) })
	if err != nil || n != 5 || len(got) != 5 || got[4] != 4 {
		t.Fatalf("%d rows %v: %v", n, got, err)
	}
	if n, err := Rows(message(recs[:1], "rowbinary/1"), &rec, func(*flow.Record) {}); err != nil || n != 1 {
		t.Errorf("an older agent's one-row message: %d rows, %v", n, err)
	}
	full := message(recs, "rowbinary/1;rows=5")
	for name, m := range map[string]*kgo.Record{
		"no header":     {Value: full.Value},
		"one-row of 5":  message(recs, "rowbinary/1"),
		"fewer named":   message(recs, "rowbinary/1;rows=4"),
		"more named":    message(recs, "rowbinary/1;rows=6"),
		"zero":          message(nil, "rowbinary/1;rows=0"),
		"leading zero":  message(recs, "rowbinary/1;rows=05"),
		"cut":           {Value: full.Value[:len(full.Value)-3], Headers: full.Headers},
		"trailing byte": {Value: append(bytes.Clone(full.Value), 1), Headers: full.Headers},
	} {
		if _, err := Rows(m, &rec, func(*flow.Record) {}); !errors.Is(err, ErrMessage) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzRows: Rows of any header and value returns an error (never a
// panic) or reads exactly the rows the header names, each of which,
// written again, decodes.
func FuzzRows(f *testing.F) {
	recs := records(3, 3, "node-a")
	for _, k := range []int{1, 3} {
		m := message(recs[:k], wire.PackedPrefix+strconv.Itoa(k))
		f.Add(string(m.Headers[0].Value), m.Value)
	}
	f.Add("rowbinary/1", []byte{1})
	f.Fuzz(func(t *testing.T, header string, value []byte) {
		var rec flow.Record
		var again []byte
		n, err := Rows(&kgo.Record{Value: value, Headers: []kgo.RecordHeader{{Key: wire.SchemaHeader, Value: []byte(header)}}}, &rec,
			func(r *flow.Record) { again = wire.Append(again, r) })
		if err != nil {
			return
		}
		if header != wire.PackedPrefix+strconv.Itoa(n) && (header != wire.RowSchema || n != 1) {
			t.Fatalf("%d rows read of a message whose header is %q", n, header)
		}
		var back flow.Record
		for b := again; len(b) > 0; {
			var err error
			if b, err = wire.Decode(b, &back); err != nil {
				t.Fatalf("a row read does not decode again: %v", err)
			}
		}
	})
}
