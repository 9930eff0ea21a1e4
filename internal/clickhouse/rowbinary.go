package clickhouse

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
)

// reader reads RowBinary values off a response; after the first error
// every read yields zero and err says what went wrong.
type reader struct {
	r   *bufio.Reader
	err error
	buf []byte
}

// maxString bounds a string in a response (weir's strings are at most
// 4096 bytes; a group key joins none).
const maxString = 1 << 20

// ErrResponse is a response that is not the RowBinary weir asked for.
var ErrResponse = errors.New("clickhouse: malformed response")

func newReader(r io.Reader) *reader { return &reader{r: bufio.NewReaderSize(r, 64<<10)} }

// more reports whether another row follows (false at the end or after an
// error).
func (r *reader) more() bool {
	if r.err != nil {
		return false
	}
	_, err := r.r.Peek(1)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return err == nil
}

func (r *reader) fixed(n int) []byte {
	if r.err != nil {
		return make([]byte, n)
	}
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	b := r.buf[:n]
	if _, err := io.ReadFull(r.r, b); err != nil {
		r.err = ErrResponse
		clear(b)
	}
	return b
}

func (r *reader) u8() uint8   { return r.fixed(1)[0] }
func (r *reader) u16() uint16 { return binary.LittleEndian.Uint16(r.fixed(2)) }
func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.fixed(4)) }
func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.fixed(8)) }

func (r *reader) addr() (a [16]byte) {
	copy(a[:], r.fixed(16))
	return a
}

func (r *reader) str() string {
	if r.err != nil {
		return ""
	}
	n, err := binary.ReadUvarint(r.r)
	if err != nil || n > maxString {
		r.err = ErrResponse
		return ""
	}
	return string(r.fixed(int(n)))
}
