package store

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// Bloom filter parameters: bitsPerEntry bits per distinct value and
// bloomK probes give about a 2% false-positive rate.
const (
	bitsPerEntry = 8
	bloomK       = 5
	maxBloomWord = 1 << 20 // decoder bound on one filter (8 MiB)
)

// bloom is a filter over 64-bit hashes with double hashing
// (h1 + i*h2) and multiply-shift range reduction (no power-of-two sizes).
type bloom struct {
	k     uint8
	words []uint64
}

// portBucketWords is the size of a port bucket bitmap: one bit per 64
// ports, used instead of a bloom filter when a block has many distinct
// ports (random ephemeral ports would make the filter large and useless).
const portBucketWords = 16

// maxPortBloom is the most distinct ports a port bloom filter takes (1 KiB);
// past it the 128-byte bucket bitmap is used.
const maxPortBloom = 1024

// portRunsKind (the hash-count byte; version 12, the port filters) is a
// port bucket bitmap stored as its runs of set buckets: run i in word i/2
// at bit 32×(i%2), u16 first bucket, u16 last bucket (bucket p>>6), the
// runs ascending with a clear bucket between any two; a last word with
// one run has 0xffffffff in its top half. Written where it takes fewer
// words than the bitmap: the gendb week's SrcPort buckets are two runs
// (ICMP's port 0 and the ephemeral range), 16 bytes where the bitmap took
// 136 (0.024 B/row).
const (
	portRunsKind = 254
	portRunPad   = 0xffffffff
)

// initPorts sizes a port filter: a bloom filter, or a bucket bitmap (k = 0)
// for blocks with very many distinct ports.
func (b *bloom) initPorts(distinct int) {
	if distinct > maxPortBloom {
		b.k = 0
		b.words = slices.Grow(b.words[:0], portBucketWords)[:portBucketWords]
		clear(b.words)
		return
	}
	b.init(distinct)
}

// addPort adds p to a port filter.
func (b *bloom) addPort(p uint16) {
	if b.k == 0 {
		b.words[p>>12] |= 1 << ((p >> 6) & 63)
		return
	}
	b.add(portHash(p))
}

// runPorts turns a bucket bitmap (k = 0) into its runs (portRunsKind)
// when they take fewer words; any other filter is left as it is.
func (b *bloom) runPorts() {
	if b.k != 0 || len(b.words) != portBucketWords {
		return
	}
	var runs [2 * (portBucketWords - 1)]uint32
	n, first := 0, -1
	for i := range portBucketWords*64 + 1 {
		set := i < portBucketWords*64 && b.words[i/64]&(1<<(i%64)) != 0
		switch {
		case set && first < 0:
			first = i
		case !set && first >= 0:
			if n == len(runs) {
				return // the bitmap is the smaller
			}
			runs[n] = uint32(first) | uint32(i-1)<<16
			n, first = n+1, -1
		}
	}
	if n == 0 {
		return // no port (never: a bitmap is made past maxPortBloom ports)
	}
	w := b.words[:(n+1)/2]
	for i := range w {
		hi := uint32(portRunPad)
		if 2*i+1 < n {
			hi = runs[2*i+1]
		}
		w[i] = uint64(runs[2*i]) | uint64(hi)<<32
	}
	b.k, b.words = portRunsKind, w
}

// checkRuns reports whether w holds port runs as runPorts writes them.
func checkRuns(w []uint64) bool {
	if len(w) == 0 || len(w) >= portBucketWords {
		return false
	}
	prev := -2
	for i, x := range w {
		for h := range 2 {
			r := uint32(x >> (32 * h))
			if r == portRunPad && h == 1 && i == len(w)-1 {
				continue
			}
			first, last := int(r&0xffff), int(r>>16)
			if first <= prev+1 || last < first || last >= portBucketWords*64 {
				return false
			}
			prev = last
		}
	}
	return true
}

// hasPort reports whether p may be in a port filter.
func (b *bloom) hasPort(p uint16) bool {
	if b.k == portRunsKind {
		q := uint32(p >> 6)
		for _, x := range b.words { // at most 15 words: a scan beats a search
			for _, r := range [2]uint32{uint32(x), uint32(x >> 32)} {
				if r != portRunPad && q >= r&0xffff && q <= r>>16 {
					return true
				}
			}
		}
		return false
	}
	if b.k == 0 {
		return len(b.words) == portBucketWords && b.words[p>>12]&(1<<((p>>6)&63)) != 0
	}
	return b.has(portHash(p))
}

func (b *bloom) init(distinct int) {
	nw := max(1, (distinct*bitsPerEntry+63)/64)
	b.k = bloomK
	b.words = slices.Grow(b.words[:0], nw)[:nw]
	clear(b.words)
}

func (b *bloom) add(h uint64) {
	m := uint64(len(b.words)) * 64
	h1, h2 := uint32(h), uint32(h>>32)|1
	for i := uint32(0); i < uint32(b.k); i++ {
		x := h1 + i*h2
		bit, _ := bits.Mul64(uint64(x)<<32, m) // fast range: x*m/2^32
		b.words[bit/64] |= 1 << (bit % 64)
	}
}

// has reports whether h may have been added; an empty filter holds nothing.
func (b *bloom) has(h uint64) bool {
	if len(b.words) == 0 {
		return false
	}
	m := uint64(len(b.words)) * 64
	h1, h2 := uint32(h), uint32(h>>32)|1
	for i := uint32(0); i < uint32(b.k); i++ {
		x := h1 + i*h2
		bit, _ := bits.Mul64(uint64(x)<<32, m)
		if b.words[bit/64]&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}

func (b *bloom) appendTo(dst []byte) []byte {
	dst = append(dst, b.k, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(b.words)))
	for _, w := range b.words {
		dst = binary.LittleEndian.AppendUint64(dst, w)
	}
	return dst
}

// parseBloom reads a filter from p, returning the bytes consumed; aset
// allows an address set (version 9 address filters, codec_aset.go), runs
// port runs (version 12 port filters, portRunsKind).
func parseBloom(p []byte, b *bloom, aset, runs bool) (int, bool) {
	if len(p) < 8 {
		return 0, false
	}
	k := p[0]
	nw := int(binary.LittleEndian.Uint32(p[4:8]))
	if (k > 16 && !(aset && k == asetKind) && !(runs && k == portRunsKind)) || nw > maxBloomWord || len(p)-8 < nw*8 ||
		(k == 0 && nw != portBucketWords) {
		return 0, false
	}
	b.k = k
	b.words = make([]uint64, nw)
	for i := range b.words {
		b.words[i] = binary.LittleEndian.Uint64(p[8+8*i:])
	}
	if (k == asetKind && !checkAset(b.words)) || (k == portRunsKind && !checkRuns(b.words)) {
		return 0, false
	}
	return 8 + 8*nw, true
}

// portHash is the filter hash of a port.
func portHash(p uint16) uint64 { return mix64(uint64(p) + 0x51ed27) }

// addrKey is the filter hash of an address.
func addrKey(a *[16]byte) uint64 { return addrHash(a) }

// portSet counts distinct ports with a 65536-bit bitmap, clearing only the
// words it touched.
type portSet struct {
	bm       [1024]uint64
	distinct []uint16
}

func (s *portSet) collect(v []uint16) []uint16 {
	s.distinct = s.distinct[:0]
	for _, p := range v {
		w, bit := p/64, uint64(1)<<(p%64)
		if s.bm[w]&bit == 0 {
			s.bm[w] |= bit
			s.distinct = append(s.distinct, p)
		}
	}
	for _, p := range s.distinct {
		s.bm[p/64] = 0
	}
	return s.distinct
}
