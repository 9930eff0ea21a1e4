package store

import (
	"errors"
	"fmt"
	"slices"
)

// Nodes appends to dst the distinct nodes of block b's records, "" among
// them when some records have none (every record of a block before
// version 6). It reads only the block's node column: a few bytes when
// the block holds one node.
func (s *Store) Nodes(b *BlockInfo, dst []string) ([]string, error) {
	if b == nil || b.h == nil || b.rp == nil {
		return dst, errors.New("store: Nodes of a BlockInfo not from Blocks")
	}
	h := b.h
	if cNode >= h.ncols || h.omit&(1<<cNode) != 0 || h.rows == 0 {
		if h.rows == 0 {
			return dst, nil
		}
		return append(dst, ""), nil
	}
	c := &h.cols[cNode]
	d := decoderPool.Get().(*decoder)
	defer decoderPool.Put(d)
	buf := slices.Grow(d.raw[:0], int(c.slen))[:c.slen]
	d.raw = buf
	if n, err := b.rp.f.ReadAt(buf, b.Offset+int64(c.off)); n < len(buf) {
		if err != nil && !isEOF(err) {
			return dst, fmt.Errorf("store: read block: %w", err)
		}
		return dst, s.damaged(b, "cut off: the file ends inside the block")
	}
	st, err := d.stream(c, buf, int(c.off), true)
	if err == nil {
		var dict []string
		if dict, _, err = d.str.decodeDict(c.enc, st, h.rows, &d.str.dict, &d.str.idx); err == nil {
			return append(dst, dict...), nil
		}
	}
	if errors.Is(err, errCorruptBlock) || errors.Is(err, errBadStream) {
		return dst, s.damaged(b, err.Error())
	}
	return dst, err
}
