package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// File names inside a partition directory.
const (
	dataName  = "blocks"
	indexName = "index"
	indexTemp = ".index.tmp"
	lockName  = "LOCK"
	dayLayout = "2006-01-02"
	maxEscLen = 128

	indexMagic   = "WIX1"
	indexVersion = 1
	indexEntry   = 40
	maxIndexSize = 64 << 20 // reader bound on an index file
)

// escapeIface turns an interface name into a safe directory name.
func escapeIface(name string) string {
	const hexd = "0123456789ABCDEF"
	if name == "" {
		return "%"
	}
	b := make([]byte, 0, len(name))
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if ok || (c == '.' && i > 0) {
			b = append(b, c)
		} else {
			b = append(b, '%', hexd[c>>4], hexd[c&15])
		}
	}
	if len(b) > maxEscLen {
		sum := sha256.Sum256([]byte(name))
		b = append(b[:maxEscLen-17], '~')
		b = append(b, hex.EncodeToString(sum[:8])...)
	}
	return string(b)
}

// unescapeIface inverts escapeIface (a cut, hashed name comes back as is).
func unescapeIface(s string) string {
	if s == "%" {
		return ""
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b = append(b, byte(v))
				i += 2
				continue
			}
		}
		b = append(b, s[i])
	}
	return string(b)
}

// dayOf returns the UTC day number and name of a Unix ns time.
func dayOf(ns int64) int64 {
	d := ns / int64(24*time.Hour)
	if ns%int64(24*time.Hour) < 0 {
		d--
	}
	return d
}

func dayName(day int64) string {
	return time.Unix(day*86400, 0).UTC().Format(dayLayout)
}

// parseDay is the inverse of dayName; ok is false for other names.
func parseDay(s string) (int64, bool) {
	t, err := time.Parse(dayLayout, s)
	if err != nil || t.Format(dayLayout) != s {
		return 0, false
	}
	return t.Unix() / 86400, true
}

// indexEntryT is one committed block in an index.
type indexEntryT struct {
	off       int64
	blockLen  int
	headerLen int
	rows      int
	minStart  int64
	maxEnd    int64
}

// index is a partition's committed state.
type index struct {
	epoch   uint64
	gen     uint64
	dataLen int64
	iface   string
	entries []indexEntryT
}

func (x *index) marshal() []byte {
	b := make([]byte, 0, 42+len(x.iface)+indexEntry*len(x.entries))
	b = append(b, indexMagic...)
	b = binary.LittleEndian.AppendUint32(b, indexVersion)
	b = binary.LittleEndian.AppendUint64(b, x.epoch)
	b = binary.LittleEndian.AppendUint64(b, x.gen)
	b = binary.LittleEndian.AppendUint64(b, uint64(x.dataLen))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(x.iface)))
	b = append(b, x.iface...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(x.entries)))
	for _, e := range x.entries {
		b = binary.LittleEndian.AppendUint64(b, uint64(e.off))
		b = binary.LittleEndian.AppendUint32(b, uint32(e.blockLen))
		b = binary.LittleEndian.AppendUint32(b, uint32(e.headerLen))
		b = binary.LittleEndian.AppendUint32(b, uint32(e.rows))
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = binary.LittleEndian.AppendUint64(b, uint64(e.minStart))
		b = binary.LittleEndian.AppendUint64(b, uint64(e.maxEnd))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

var errBadIndex = errors.New("store: corrupt index")

func parseIndex(b []byte) (*index, error) {
	if len(b) < 38 || string(b[:4]) != indexMagic || binary.LittleEndian.Uint32(b[4:8]) != indexVersion {
		return nil, errBadIndex
	}
	if crc32.Checksum(b[:len(b)-4], castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, errBadIndex
	}
	x := &index{
		epoch:   binary.LittleEndian.Uint64(b[8:16]),
		gen:     binary.LittleEndian.Uint64(b[16:24]),
		dataLen: int64(binary.LittleEndian.Uint64(b[24:32])),
	}
	nl := int(binary.LittleEndian.Uint16(b[32:34]))
	p := b[34 : len(b)-4]
	if len(p) < nl+4 {
		return nil, errBadIndex
	}
	x.iface = string(p[:nl])
	n := int(binary.LittleEndian.Uint32(p[nl:]))
	p = p[nl+4:]
	if len(p) != n*indexEntry || x.dataLen < 0 {
		return nil, errBadIndex
	}
	x.entries = make([]indexEntryT, n)
	var end int64
	for i := range x.entries {
		e := &x.entries[i]
		e.off = int64(binary.LittleEndian.Uint64(p[0:]))
		e.blockLen = int(binary.LittleEndian.Uint32(p[8:]))
		e.headerLen = int(binary.LittleEndian.Uint32(p[12:]))
		e.rows = int(binary.LittleEndian.Uint32(p[16:]))
		e.minStart = int64(binary.LittleEndian.Uint64(p[24:]))
		e.maxEnd = int64(binary.LittleEndian.Uint64(p[32:]))
		if e.off != end || e.headerLen > e.blockLen || e.rows > maxRows {
			return nil, errBadIndex
		}
		end = e.off + int64(e.blockLen)
		p = p[indexEntry:]
	}
	if end != x.dataLen {
		return nil, errBadIndex
	}
	return x, nil
}

// readIndex loads dir's index. A missing index is an empty partition
// (os.ErrNotExist); a corrupt one is rebuilt by scanning the data file and
// reported with errBadIndex alongside the recovered index.
func readIndex(dir string) (*index, error) {
	f, err := os.Open(filepath.Join(dir, indexName))
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxIndexSize+1))
	f.Close()
	if err != nil {
		return nil, err
	}
	x, perr := parseIndex(b)
	if perr == nil && len(b) <= maxIndexSize {
		return x, nil
	}
	x, err = scanData(dir)
	if err != nil {
		return nil, err
	}
	x.iface = unescapeIface(filepath.Base(filepath.Dir(dir)))
	return x, errBadIndex
}

// scanData rebuilds an index from the intact blocks at the start of a data
// file (headers and column CRCs checked), stopping at the first bad one.
func scanData(dir string) (*index, error) {
	f, err := os.Open(filepath.Join(dir, dataName))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	x := &index{epoch: newEpoch()}
	var off int64
	var buf []byte
	for {
		var fixed [fixedHeader]byte
		if _, err := f.ReadAt(fixed[:], off); err != nil {
			break
		}
		bl := int(binary.LittleEndian.Uint32(fixed[4:8]))
		if string(fixed[:4]) != blockMagic || bl < fixedHeader || bl > 64<<20 {
			break
		}
		buf = append(buf[:0], make([]byte, bl)...)
		if _, err := f.ReadAt(buf, off); err != nil {
			break
		}
		h, err := parseHeader(buf, true)
		if err != nil || h.blockLen != bl || !colsIntact(h, buf) {
			break
		}
		x.entries = append(x.entries, indexEntryT{off: off, blockLen: bl, headerLen: h.headerLen,
			rows: h.rows, minStart: h.minStart, maxEnd: h.maxEnd})
		off += int64(bl)
	}
	x.dataLen = off
	return x, nil
}

// colsIntact checks every column CRC of a whole block.
func colsIntact(h *blockHeader, b []byte) bool {
	for i := range h.cols[:h.ncols] {
		if h.omit&(1<<i) != 0 {
			continue
		}
		c := &h.cols[i]
		if crc32.Checksum(b[c.off:c.off+c.slen], castagnoli) != c.ck {
			return false
		}
	}
	return true
}

// writeIndex replaces dir's index atomically: temp file, fsync, rename,
// fsync of the directory.
func writeIndex(dir string, x *index, sync bool) (int, error) {
	b := x.marshal()
	tmp := filepath.Join(dir, indexTemp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	_, err = f.Write(b)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, indexName))
	}
	if err == nil && sync {
		err = syncDir(dir)
	}
	if err != nil {
		return 0, fmt.Errorf("store: write index: %w", err)
	}
	return len(b), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// mkdirSynced creates dir and any missing parents, fsyncing each parent
// whose entries changed so the new directory survives a crash.
func mkdirSynced(root, dir string, sync bool) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != root && parent != dir {
		if err := mkdirSynced(root, parent, sync); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if sync {
		return syncDir(parent)
	}
	return nil
}
