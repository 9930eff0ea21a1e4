package clickhouse

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// maxPartitions bounds the rows LoadOffsets reads (Kafka's own bound on a
// topic's partitions is far lower in practice).
const maxPartitions = 1 << 20

// LoadOffsets reads from db's TableOffsets, for a consumer group and
// topic, the highest offset recorded per partition. Group and topic reach
// the server as query parameters where it has them (f.Params), else as
// Quote's literals.
func LoadOffsets(ctx context.Context, c Conn, f Features, db, group, topic string) (map[int32]int64, error) {
	if err := CheckIdent("database", db); err != nil {
		return nil, err
	}
	s := NewStmt(f.Params).S("SELECT kafka_partition, max(kafka_offset) FROM ", db, ".", TableOffsets, " WHERE consumer_group = ").Str(group).
		S(" AND topic = ").Str(topic).S(" GROUP BY kafka_partition FORMAT RowBinary")
	rc, err := c.Do(ctx, s.SQL(), s.Params(), nil)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	r := newReader(rc)
	out := map[int32]int64{}
	for r.more() {
		p, o := int32(r.u32()), r.u64()
		if r.err != nil {
			break
		}
		if len(out) >= maxPartitions || o > 1<<63-1 {
			return nil, fmt.Errorf("%w: %s.%s: partition %d offset %d", ErrResponse, db, TableOffsets, p, o)
		}
		out[p] = int64(o)
	}
	if r.err != nil {
		return nil, fmt.Errorf("clickhouse: reading %s.%s: %w", db, TableOffsets, r.err)
	}
	return out, nil
}

// RecordOffsets inserts into db's TableOffsets one row per partition of
// offsets (partition → the last offset inserted), as RowBinary data: the
// group and topic are data, never SQL. buf is reused (nil: allocate).
func RecordOffsets(ctx context.Context, c Conn, db, group, topic string, offsets map[int32]int64, buf *bytes.Buffer) error {
	if err := CheckIdent("database", db); err != nil {
		return err
	}
	if len(offsets) == 0 {
		return nil
	}
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	buf.Reset()
	now := uint32(time.Now().Unix())
	var num [binary.MaxVarintLen64]byte
	for p, o := range offsets {
		if o < 0 {
			return fmt.Errorf("clickhouse: offset %d of partition %d: want 0 or more", o, p)
		}
		for _, s := range []string{group, topic} {
			buf.Write(num[:binary.PutUvarint(num[:], uint64(len(s)))])
			buf.WriteString(s)
		}
		buf.Write(binary.LittleEndian.AppendUint32(num[:0], uint32(p)))
		buf.Write(binary.LittleEndian.AppendUint64(num[:0], uint64(o)))
		buf.Write(binary.LittleEndian.AppendUint32(num[:0], now))
	}
	rc, err := c.Do(ctx, "INSERT INTO "+db+"."+TableOffsets+" (consumer_group, topic, kafka_partition, kafka_offset, at) FORMAT RowBinary",
		nil, bytes.NewReader(buf.Bytes()))
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, io.LimitReader(rc, 1<<20))
	return errors.Join(err, rc.Close())
}
