package store

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/fse"
)

// fseCases are planes FSE codes: skewed to every degree (one byte at
// 60-99.9% of the plane, which gives states of no bits), a few values
// at random, sizes from 16 bytes to a whole chunk.
func fseCases() [][]byte {
	r := rand.New(rand.NewPCG(9, 10))
	var out [][]byte
	for _, n := range []int{16, 100, 1000, 5000, 20000, segChunk} {
		for _, top := range []float64{0.6, 0.9, 0.95, 0.99, 0.999} {
			for _, alpha := range []int{2, 5, 40, 256} {
				b := make([]byte, n)
				for i := range b {
					if r.Float64() >= top {
						b[i] = byte(1 + r.IntN(alpha-1))
					}
				}
				out = append(out, b)
			}
		}
	}
	return out
}

// klauspost is fse.Decompress as segDecoder called it before fseDecoder:
// the stream's n bytes, or false.
func klauspost(src []byte, n int) ([]byte, bool) {
	var s fse.Scratch
	s.DecompressLimit = n
	got, err := fse.Decompress(src, &s)
	return got, err == nil && len(got) == n
}

// TestFSEDecode: every case fse.Compress codes decodes to itself with
// fseDecoder, with a table built and (the second time round, the counts
// being the same) a kept one, and any other length is refused; a stream
// cut short or with a byte changed gives fse.Decompress's answer.
func TestFSEDecode(t *testing.T) {
	var d fseDecoder
	var s fse.Scratch
	coded := 0
	for round := range 2 {
		for i, b := range fseCases() {
			s.Out = s.Out[:0]
			enc, err := fse.Compress(b, &s)
			if err != nil {
				continue // incompressible or one value: segEncoder stores those otherwise
			}
			enc = bytes.Clone(enc)
			coded++
			out := make([]byte, len(b))
			if !d.decode(enc, out) || !bytes.Equal(out, b) {
				t.Fatalf("round %d case %d (%d bytes): not decoded to itself", round, i, len(b))
			}
			for _, n := range []int{len(b) - 1, len(b) + 1, len(b) + 2} {
				if n >= 0 && d.decode(enc, make([]byte, n)) {
					t.Fatalf("case %d: %d bytes decoded as %d", i, len(b), n)
				}
			}
			if round == 1 {
				continue
			}
			r := rand.New(rand.NewPCG(uint64(i), 1))
			for range 20 {
				bad := bytes.Clone(enc)
				if r.IntN(2) == 0 {
					bad = bad[:r.IntN(len(bad))]
				} else {
					bad[r.IntN(len(bad))] ^= byte(1 + r.IntN(255))
				}
				sameAsKlauspost(t, bad, len(b))
			}
		}
	}
	if coded < 100 {
		t.Fatalf("only %d cases coded with FSE", coded)
	}
}

// sameAsKlauspost fails t unless fseDecoder and fse.Decompress agree on
// src decoded to n bytes: both refuse it, or both give the same bytes.
func sameAsKlauspost(t *testing.T, src []byte, n int) {
	t.Helper()
	want, ok := klauspost(src, n)
	var d fseDecoder
	got := make([]byte, n)
	if gotOK := d.decode(src, got); gotOK != ok || ok && !bytes.Equal(got, want) {
		t.Fatalf("%d bytes to %d: fseDecoder %v, fse.Decompress %v (or other bytes)", len(src), n, gotOK, ok)
	}
}

// FuzzFSEDecode: fseDecoder answers as fse.Decompress on any bytes and
// length (refusing, or the same bytes), never panics, and decodes what
// fse.Compress codes from any data.
func FuzzFSEDecode(f *testing.F) {
	var s fse.Scratch
	for _, b := range fseCases()[:40] {
		s.Out = s.Out[:0]
		if enc, err := fse.Compress(b, &s); err == nil && len(enc) < maxFuzzInput {
			f.Add(bytes.Clone(enc), uint16(len(b)))
		}
	}
	f.Fuzz(func(t *testing.T, src []byte, n uint16) {
		sameAsKlauspost(t, src, int(n))
		var s fse.Scratch
		enc, err := fse.Compress(src, &s)
		if err != nil {
			return
		}
		var d fseDecoder
		out := make([]byte, len(src))
		if !d.decode(enc, out) || !bytes.Equal(out, src) {
			t.Fatalf("%d bytes coded to %d: not decoded to themselves", len(src), len(enc))
		}
	})
}

// BenchmarkFSEDecode decodes a 5,000-byte plane that is 95% one byte (a
// block's IPVersion or a counter's high plane) with fseDecoder and with
// fse.Decompress (as segDecoder did before, copy included): ns/byte.
func BenchmarkFSEDecode(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	plane := make([]byte, 5000)
	for i := range plane {
		if r.IntN(20) == 0 {
			plane[i] = byte(1 + r.IntN(30))
		}
	}
	var s fse.Scratch
	enc, err := fse.Compress(plane, &s)
	if err != nil {
		b.Fatal(err)
	}
	enc = bytes.Clone(enc)
	out := make([]byte, len(plane))
	b.Run("weir", func(b *testing.B) {
		var d fseDecoder
		for b.Loop() {
			if !d.decode(enc, out) {
				b.Fatal("not decoded")
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(plane)), "ns/byte")
	})
	b.Run("klauspost", func(b *testing.B) {
		var s fse.Scratch
		s.DecompressLimit = len(plane)
		for b.Loop() {
			got, err := fse.Decompress(enc, &s)
			if err != nil {
				b.Fatal(err)
			}
			copy(out, got)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(plane)), "ns/byte")
	})
}
