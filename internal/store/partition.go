package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"

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

	indexMagic = "WIX1"
	// indexVersion 1 lists blocks back to back from offset 0; version 2
	// (written only when needed) lets them start later and leave gaps:
	// pruned blocks (punched holes) and damage a repair left in place.
	indexVersion    = 1
	indexVersionGap = 2
	indexEntry      = 40
	maxIndexSize    = 64 << 20 // reader bound on an index file
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
	// The index file as read or written (indexio.go): its sound length
	// (base and journal records), the CRC32C of those bytes, and the
	// journal records among them. fileLen 0: not known (rebuilt by a scan).
	fileLen int64
	crc     uint32
	nrec    int
}

func (x *index) marshal() []byte {
	b := make([]byte, 0, 42+len(x.iface)+indexEntry*len(x.entries))
	b = append(b, indexMagic...)
	ver, end := uint32(indexVersion), int64(0)
	for _, e := range x.entries {
		if e.off != end {
			ver = indexVersionGap
		}
		end = e.off + int64(e.blockLen)
	}
	b = binary.LittleEndian.AppendUint32(b, ver)
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
	if len(b) < 38 || string(b[:4]) != indexMagic {
		return nil, errBadIndex
	}
	ver := binary.LittleEndian.Uint32(b[4:8])
	if ver != indexVersion && ver != indexVersionGap {
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
	if int64(len(p)) != int64(n)*indexEntry || x.dataLen < 0 {
		return nil, errBadIndex
	}
	x.entries = make([]indexEntryT, n)
	var end int64
	for i := range x.entries {
		e, ok := parseEntry(p, end)
		if !ok || (ver == indexVersion && e.off != end) {
			return nil, errBadIndex
		}
		x.entries[i] = e
		end = e.off + int64(e.blockLen)
		p = p[indexEntry:]
	}
	if end != x.dataLen {
		return nil, errBadIndex
	}
	return x, nil
}
