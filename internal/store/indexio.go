package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"
)

// readIndex loads the index of partition directory d. A missing index is
// os.ErrNotExist; a damaged one is rebuilt from the intact blocks of the
// data file and returned with errBadIndex (gaps are the damaged stretches
// the scan skipped).
func readIndex(d *dirH) (x *index, gaps []gap, err error) {
	x, perr, err := loadIndex(d)
	if err != nil {
		return nil, nil, err
	}
	if perr == nil {
		return x, nil, nil
	}
	x, gaps, err = scanIndex(d)
	if err != nil {
		return nil, nil, err
	}
	return x, gaps, perr
}

// loadIndex reads and parses d's index file; perr says why it is unsound
// (errBadIndex, errTornIndex, or its size), err why it could not be read.
// An index ending in a record cut short is read again a few times first.
func loadIndex(d *dirH) (x *index, perr, err error) {
	for try := 0; ; try++ {
		f, err := d.open(indexName, os.O_RDONLY, 0)
		if err != nil {
			return nil, nil, err
		}
		b, err := io.ReadAll(io.LimitReader(f, maxIndexSize+1))
		f.Close()
		if err != nil {
			return nil, nil, err
		}
		if len(b) > maxIndexSize {
			return nil, fmt.Errorf("%w: larger than %d bytes", errBadIndex, maxIndexSize), nil
		}
		if x, perr = parseIndexFile(b); perr == nil {
			return x, nil, nil
		}
		if !errors.Is(perr, errTornIndex) || try == tornRetries {
			return nil, perr, nil
		}
		time.Sleep(time.Millisecond) // a writer's append in flight: read again
	}
}

// tornRetries is how often readIndex reads an index again that ends in a
// record cut short: a reader can race the writer's append.
const tornRetries = 3

// scanIndex builds an index of every intact block in d's data file.
func scanIndex(d *dirH) (*index, []gap, error) {
	x := &index{epoch: newEpoch(), iface: unescapeIface(filepath.Base(filepath.Dir(d.path)))}
	f, err := d.open(dataName, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return x, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	sc := scanner{r: f, size: st.Size()}
	var g, gaps []gap
	x.entries, g = sc.scan()
	end := int64(0)
	for _, e := range x.entries {
		end = e.off + int64(e.blockLen)
	}
	x.dataLen = end
	for _, gp := range g { // what follows the last intact block is an unfinished write's tail, not damage
		if gp.off < end {
			gaps = append(gaps, gp)
		}
	}
	return x, gaps, nil
}

// writeIndex replaces d's index atomically: a new temp file (any old one,
// or a link in its place, is removed first: O_EXCL never opens someone
// else's file), fsync, rename over the index, fsync of the directory.
func writeIndex(d *dirH, x *index, sync bool, perm os.FileMode) (int, error) {
	b := x.marshal()
	if err := d.remove(indexTemp); err != nil {
		return 0, fmt.Errorf("store: write index: %w", err)
	}
	f, err := d.open(indexTemp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return 0, fmt.Errorf("store: write index: %w", err)
	}
	_, err = f.Write(b)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.rename(indexTemp, indexName)
	}
	if err == nil && sync {
		err = d.sync()
	}
	if err != nil {
		return 0, fmt.Errorf("store: write index: %w", err)
	}
	x.fileLen, x.crc, x.nrec = int64(len(b)), crc32.Checksum(b, castagnoli), 0
	return len(b), nil
}

// The index file is a base (index.marshal, what writeIndex writes whole)
// followed by journal records, one a writeout: appending a record and one
// fsync commits new blocks, where rewriting the index cost a temp file, its
// fsync, a rename (on ext4 also a flush of the new file) and a directory
// fsync. A record is
//
//	"WIXJ", u64 generation, u64 committed data length, u32 entries,
//	entries × 40 bytes (as in the base), u32 CRC32C of the whole file up
//	to this field
//
// so it binds to every byte before it (the base's epoch included). A
// record cut short is an append in flight (read again) or, when it stays,
// a crash inside one or damage (a file cut); that, a complete record that
// fails its checks, or bytes after one make the index rebuilt by scanning
// the data file, as any damaged index is: no intact block is lost.
const (
	journalMagic = "WIXJ"
	journalHead  = 24  // magic, generation, data length, entry count
	maxJournal   = 256 // records before the writer rewrites the index whole
)

// errTornIndex is an index that ends in a journal record cut short.
var errTornIndex = fmt.Errorf("%w: it ends in an unfinished append", errBadIndex)

// baseLen is the length of the base index at the start of b, 0 when b
// does not start with one.
func baseLen(b []byte) int {
	if len(b) < 38 || string(b[:4]) != indexMagic {
		return 0
	}
	nl := int(binary.LittleEndian.Uint16(b[32:34]))
	if len(b) < 34+nl+4 {
		return 0
	}
	l := int64(34+nl+4) + int64(binary.LittleEndian.Uint32(b[34+nl:]))*indexEntry + 4
	if l > int64(len(b)) {
		return 0
	}
	return int(l)
}

// parseIndexFile parses an index file: its base and the journal records
// after it. errTornIndex: it ends in a record cut short; errBadIndex:
// anything else unsound.
func parseIndexFile(b []byte) (*index, error) {
	bl := baseLen(b)
	if bl == 0 {
		return nil, errBadIndex
	}
	x, err := parseIndex(b[:bl])
	if err != nil {
		return nil, err
	}
	crc := crc32.Checksum(b[:bl], castagnoli)
	off := bl
	for off < len(b) {
		r := b[off:]
		if len(r) < journalHead+4 {
			return nil, errTornIndex
		}
		n := int64(binary.LittleEndian.Uint32(r[20:24]))
		l := journalHead + n*indexEntry + 4
		if l > int64(len(r)) {
			return nil, errTornIndex
		}
		rec := r[:l]
		body := rec[:l-4]
		if string(rec[:4]) != journalMagic || n == 0 ||
			crc32.Update(crc, castagnoli, body) != binary.LittleEndian.Uint32(rec[l-4:]) ||
			binary.LittleEndian.Uint64(rec[4:12]) != x.gen+1 {
			return nil, errBadIndex
		}
		end := x.dataLen
		for p := rec[journalHead : l-4]; len(p) > 0; p = p[indexEntry:] {
			e, ok := parseEntry(p, end)
			if !ok {
				return nil, errBadIndex
			}
			end = e.off + int64(e.blockLen)
			x.entries = append(x.entries, e)
		}
		if int64(binary.LittleEndian.Uint64(rec[12:20])) != end {
			return nil, errBadIndex
		}
		x.gen, x.dataLen = x.gen+1, end
		crc = crc32.Update(crc, castagnoli, rec)
		x.nrec++
		off += int(l)
	}
	x.fileLen, x.crc = int64(off), crc
	return x, nil
}

// parseEntry decodes one 40-byte index entry; ok is false when it is
// unsound or starts before end (the previous block's end).
func parseEntry(p []byte, end int64) (e indexEntryT, ok bool) {
	e.off = int64(binary.LittleEndian.Uint64(p[0:]))
	e.blockLen = int(binary.LittleEndian.Uint32(p[8:]))
	e.headerLen = int(binary.LittleEndian.Uint32(p[12:]))
	e.rows = int(binary.LittleEndian.Uint32(p[16:]))
	e.minStart = int64(binary.LittleEndian.Uint64(p[24:]))
	e.maxEnd = int64(binary.LittleEndian.Uint64(p[32:]))
	ok = e.off >= end && e.headerLen >= fixedHeader && e.headerLen <= e.blockLen && e.rows <= maxRows &&
		e.off <= math.MaxInt64-int64(e.blockLen)
	return e, ok
}

// appendIndexEntry appends e's 40 bytes.
func appendIndexEntry(b []byte, e *indexEntryT) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(e.off))
	b = binary.LittleEndian.AppendUint32(b, uint32(e.blockLen))
	b = binary.LittleEndian.AppendUint32(b, uint32(e.headerLen))
	b = binary.LittleEndian.AppendUint32(b, uint32(e.rows))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(e.minStart))
	return binary.LittleEndian.AppendUint64(b, uint64(e.maxEnd))
}

// journalRecord appends to dst the record that commits nx's entries from
// index from on, over a file of nx.fileLen bytes whose CRC32C is nx.crc.
func journalRecord(dst []byte, nx *index, from int) []byte {
	start := len(dst)
	dst = append(dst, journalMagic...)
	dst = binary.LittleEndian.AppendUint64(dst, nx.gen)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(nx.dataLen))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(nx.entries)-from))
	for i := from; i < len(nx.entries); i++ {
		dst = appendIndexEntry(dst, &nx.entries[i])
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Update(nx.crc, castagnoli, dst[start:]))
}

// openJournal opens d's index for appending when it is what the writer
// last committed: a regular file of one link and exactly fileLen bytes
// (a torn append's tail, or anything else, makes the next commit rewrite
// the index whole instead). nil when it is not.
func openJournal(d *dirH, fileLen int64) *os.File {
	f, err := d.open(indexName, os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	if st, err := f.Stat(); err != nil || links(st) != 1 || st.Size() != fileLen {
		f.Close()
		return nil
	}
	return f
}

// appendJournal commits nx (x's entries and those from index from on) by
// writing its journal record at the end of index file f and fsyncing it.
// On failure it cuts f back (a record that landed must not commit rows the
// writer will retry); the caller then stops appending to f.
// fault (tests) fails the append after the record is written.
func appendJournal(f *os.File, nx *index, from int, sync bool, buf []byte, fault func() error) ([]byte, error) {
	buf = journalRecord(buf[:0], nx, from)
	_, err := f.WriteAt(buf, nx.fileLen)
	if err == nil {
		err = fault()
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if err != nil {
		if terr := f.Truncate(nx.fileLen); terr != nil { // the retry's rewrite under a new epoch replaces it anyway
			err = errors.Join(err, fmt.Errorf("cutting the record back: %w", terr))
		}
		return buf, fmt.Errorf("store: append to index: %w", err)
	}
	nx.fileLen += int64(len(buf))
	nx.crc = crc32.Update(nx.crc, castagnoli, buf)
	nx.nrec++
	return buf, nil
}
