package kafka

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/wire"
)

// With ?format=packed (the default) a Kafka message holds many rows:
// franz-go's and the broker's work per message (request encoding,
// varints, key, header, promise) is shared by its rows (docs/benchmarks.md,
// Fleet: sender 3.4 → 1.0 µs CPU per record).
const (
	// Buckets is how many Kafka keys the packed sink uses: a row goes to
	// the bucket of the top bits of its flow's KeyHash, and the one-byte
	// bucket number is its message's key, so every record of a flow
	// lands in one partition and a topic of up to Buckets partitions is
	// spread over all of them.
	Buckets    = 256
	packRows   = 256           // a message is sent once it holds this many rows
	packBytes  = 32 << 10      // or this many bytes (far under the broker's 1 MB message.max.bytes)
	packInit   = 2 << 10       // a new message buffer's capacity; append grows it
	maxPackCap = 2 * packBytes // a buffer grown past this (a huge row) goes back to the GC when its message returns
	maxFree    = 1024          // free messages kept for reuse
)

// bucketKeys are the messages' keys, shared and never written once made.
var bucketKeys = func() (k [Buckets][1]byte) {
	for i := range k {
		k[i][0] = byte(i)
	}
	return
}()

// packer is the packed sink's state.
type packer struct {
	mu    sync.Mutex     // guards open, armed and the packing of rows (Write, lingered, Flush, Close)
	open  [Buckets]*pack // each bucket's message being filled, nil when none
	timer *time.Timer    // sends the open messages a linger after the first opened
	armed bool

	freeMu sync.Mutex   // guards free; promises take only this lock, so TryProduce may call them under mu
	free   []*pack      // messages not in use, for reuse
	held   atomic.Int64 // capacity of the buffers of messages open or in flight: at most BufferBytes (and one growth)
}

// pack is one Kafka message: its rows, the kgo.Record that carries them
// and its header, reused when the promise returns it, so producing
// allocates nothing per message once the packs exist. Nothing of it is
// written while franz-go holds it.
type pack struct {
	rec  kgo.Record
	buf  []byte
	rows int
	hdr  [1]kgo.RecordHeader
	hval [32]byte // the header's value: wire.PackedPrefix and the row count
	ctx  packCtx
}

// packCtx is a message's Context: it never ends, and leads the promise
// back to the message's pack.
type packCtx struct {
	context.Context
	p *pack
}

// writePacked packs recs into their buckets' messages; a message is handed
// to franz-go when full, a linger after the first of the open ones opened,
// or at Flush or Close. Rows that do not fit the buffer (BufferRecords
// rows, BufferBytes of message buffers) are dropped and counted.
func (s *Sink) writePacked(recs []flow.Record) error {
	pk := &s.pk
	pk.mu.Lock()
	defer pk.mu.Unlock()
	if s.closed.Load() {
		s.dropped[DropShutdown].Add(uint64(len(recs)))
		return errClosed
	}
	s.records.Add(uint64(len(recs)))
	now := time.Now() // one clock read a call: franz-go would read it for every message without a Timestamp
	limit, maxBytes := uint64(s.cfg.BufferRecords), int64(s.cfg.BufferBytes)
	var dropped uint64
	for i := range recs {
		r := &recs[i]
		if s.inflight.Load() >= limit || pk.held.Load() >= maxBytes {
			dropped++
			continue
		}
		b := KeyHash(&r.Key) >> 56 // the top 8 bits: Buckets is 256
		p := pk.open[b]
		if p == nil {
			if p = s.take(); p == nil {
				dropped++
				continue
			}
			pk.open[b] = p
			if !pk.armed {
				pk.armed = true
				pk.timer.Reset(s.cfg.Linger)
			}
		}
		c := cap(p.buf)
		p.buf = wire.Append(p.buf, r)
		if d := cap(p.buf) - c; d != 0 {
			pk.held.Add(int64(d))
		}
		p.rows++
		s.inflight.Add(1)
		if p.rows >= packRows || len(p.buf) >= packBytes {
			pk.open[b] = nil
			s.send(p, int(b), now)
		}
	}
	if dropped != 0 {
		s.dropped[DropBufferFull].Add(dropped)
	}
	return nil
}

// take returns a free pack, or a new one, charging its buffer to held;
// nil when even a new buffer would pass BufferBytes.
func (s *Sink) take() *pack {
	pk := &s.pk
	pk.freeMu.Lock()
	var p *pack
	if n := len(pk.free); n > 0 {
		p = pk.free[n-1]
		pk.free = pk.free[:n-1]
	}
	pk.freeMu.Unlock()
	if p == nil {
		p = &pack{}
		p.ctx = packCtx{Context: context.Background(), p: p}
	}
	if p.buf == nil || pk.held.Load()+int64(cap(p.buf)) > int64(s.cfg.BufferBytes) {
		if pk.held.Load()+packInit > int64(s.cfg.BufferBytes) {
			s.put(p)
			return nil
		}
		p.buf = make([]byte, 0, packInit) // a large reused buffer would pass the bound: a small one
	}
	pk.held.Add(int64(cap(p.buf)))
	return p
}

// put returns a pack that holds no rows and no charge to the free list.
func (s *Sink) put(p *pack) {
	pk := &s.pk
	pk.freeMu.Lock()
	if len(pk.free) < maxFree {
		pk.free = append(pk.free, p)
	}
	pk.freeMu.Unlock()
}

// send hands a filled pack to franz-go as the message of bucket b. pk.mu
// is held; the promise may run before TryProduce returns (it takes only
// freeMu).
func (s *Sink) send(p *pack, b int, now time.Time) {
	p.hdr[0] = kgo.RecordHeader{Key: wire.SchemaHeader, Value: wire.AppendSchema(p.hval[:0], p.rows, true)}
	p.rec = kgo.Record{Topic: s.cfg.Topic, Key: bucketKeys[b][:], Value: p.buf, Headers: p.hdr[:], Timestamp: now, Context: &p.ctx}
	s.cl.TryProduce(context.Background(), &p.rec, s.packPromise)
}

// sendOpen sends every bucket's open message; pk.mu is held.
func (s *Sink) sendOpen(now time.Time) {
	pk := &s.pk
	for b, p := range pk.open {
		if p != nil {
			pk.open[b] = nil
			s.send(p, b, now)
		}
	}
	pk.armed = false
}

// lingered is the linger timer's: it sends the open messages.
func (s *Sink) lingered() {
	s.pk.mu.Lock()
	s.sendOpen(time.Now())
	s.pk.mu.Unlock()
}

// sendAll sends the open messages now (Flush, Close); a no-op with one
// row a message.
func (s *Sink) sendAll(closing bool) {
	if !s.cfg.Packed() {
		return
	}
	s.pk.mu.Lock()
	if closing {
		s.closed.Store(true) // under mu: no Write fills a message after the last is sent
		s.pk.timer.Stop()
	}
	s.sendOpen(time.Now())
	s.pk.mu.Unlock()
}

// packDone is every packed message's promise: it counts the outcome of
// its rows and frees the pack.
func (s *Sink) packDone(r *kgo.Record, err error) {
	p := r.Context.(*packCtx).p
	rows := uint64(p.rows)
	if err == nil {
		s.produced.Add(rows)
		s.messages.Add(1)
		s.bytes.Add(uint64(len(r.Value)))
	} else {
		s.fail(err, rows)
	}
	s.pk.held.Add(-int64(cap(p.buf)))
	p.rec = kgo.Record{}
	p.rows = 0
	p.buf = p.buf[:0]
	if cap(p.buf) > maxPackCap {
		p.buf = nil
	}
	s.put(p)
	s.inflight.Add(-rows)
}
