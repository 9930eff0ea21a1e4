package store

import "slices"

// Byte planes: byte j of every value of a column stored together, so that
// the entropy coder sees the low and high bytes of the values apart.

// putPlanes appends w byte planes of u: byte j of every value together.
func putPlanes(dst []byte, u []uint64, w int) []byte { return putPlanesSub(dst, u, 0, w) }

// putPlanesSub appends w byte planes of v[i]-base (encFOR at scale 1
// without a pass that stores the differences first). Widths 1 to 4 (nearly
// every stream) write all their planes in one pass over v, with constant
// shifts: a pass a plane cost a load a byte.
func putPlanesSub(dst []byte, v []uint64, base uint64, w int) []byte {
	n := len(v)
	off := len(dst)
	dst = slices.Grow(dst, w*n)[:off+w*n]
	out := dst[off:]
	switch w {
	case 0:
	case 1:
		p0 := out[:n]
		p0 = p0[:len(v)] // bounds-check hint
		for i, x := range v {
			p0[i] = byte(x - base)
		}
	case 2:
		p0, p1 := out[:n], out[n:2*n]
		p0, p1 = p0[:len(v)], p1[:len(v)]
		for i, x := range v {
			x -= base
			p0[i], p1[i] = byte(x), byte(x>>8)
		}
	case 3:
		p0, p1, p2 := out[:n], out[n:2*n], out[2*n:3*n]
		p0, p1, p2 = p0[:len(v)], p1[:len(v)], p2[:len(v)]
		for i, x := range v {
			x -= base
			p0[i], p1[i], p2[i] = byte(x), byte(x>>8), byte(x>>16)
		}
	case 4:
		p0, p1, p2, p3 := out[:n], out[n:2*n], out[2*n:3*n], out[3*n:4*n]
		p0, p1, p2, p3 = p0[:len(v)], p1[:len(v)], p2[:len(v)], p3[:len(v)]
		for i, x := range v {
			x -= base
			p0[i], p1[i], p2[i], p3[i] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
		}
	default:
		for j := 0; j < w; j++ {
			p := out[j*n : (j+1)*n]
			p = p[:len(v)]
			sh := uint(8 * j)
			for i, x := range v {
				p[i] = byte((x - base) >> sh)
			}
		}
	}
	return dst
}

// getPlanes fills u (len n) from w byte planes in src (len w*n). Widths 1
// to 3 (nearly every column) take one pass over u instead of w.
func getPlanes[T uint32 | uint64](src []byte, u []T, w int) {
	n := len(u)
	switch w {
	case 0:
		clear(u)
		return
	case 1:
		p := src[:n]
		for i := range u {
			u[i] = T(p[i])
		}
		return
	case 2:
		p0, p1 := src[:n], src[n:2*n]
		p0, p1 = p0[:len(u)], p1[:len(u)] // bounds-check hints
		for i := range u {
			u[i] = T(p0[i]) | T(p1[i])<<8
		}
		return
	case 3:
		p0, p1, p2 := src[:n], src[n:2*n], src[2*n:3*n]
		p0, p1, p2 = p0[:len(u)], p1[:len(u)], p2[:len(u)]
		for i := range u {
			u[i] = T(p0[i]) | T(p1[i])<<8 | T(p2[i])<<16
		}
		return
	}
	p := src[:n]
	for i := range u {
		u[i] = T(p[i])
	}
	for j := 1; j < w; j++ {
		p := src[j*n : (j+1)*n]
		p = p[:len(u)]
		sh := uint(8 * j)
		for i := range u {
			u[i] |= T(p[i]) << sh
		}
	}
}

// forPlanes fills dst (len n) with base + x·scale for the values x of w
// (at most 3) byte planes in src (len w*n): getPlanes and encFOR's pass
// in one.
func forPlanes[T integer](src []byte, dst []T, w int, base, scale uint64) {
	n := len(dst)
	switch w {
	case 0:
		for i := range dst {
			dst[i] = T(base)
		}
	case 1:
		p0 := src[:n]
		for i, b := range p0[:len(dst)] {
			dst[i] = T(base + uint64(b)*scale)
		}
	case 2:
		p0, p1 := src[:n], src[n:2*n]
		p0, p1 = p0[:len(dst)], p1[:len(dst)]
		for i := range dst {
			dst[i] = T(base + (uint64(p0[i])|uint64(p1[i])<<8)*scale)
		}
	case 3:
		p0, p1, p2 := src[:n], src[n:2*n], src[2*n:3*n]
		p0, p1, p2 = p0[:len(dst)], p1[:len(dst)], p2[:len(dst)]
		for i := range dst {
			dst[i] = T(base + (uint64(p0[i])|uint64(p1[i])<<8|uint64(p2[i])<<16)*scale)
		}
	}
}

// maxOf returns the largest element of u (0 if empty).
// Four maxima interleaved: one compare and conditional move after
// another waited on the previous one (a fifth of decodeAddrsSet's time).
func maxOf[T uint32 | uint64](u []T) T {
	var m0, m1, m2, m3 T
	i := 0
	for ; i+4 <= len(u); i += 4 {
		w := u[i : i+4 : i+4]
		m0, m1, m2, m3 = max(m0, w[0]), max(m1, w[1]), max(m2, w[2]), max(m3, w[3])
	}
	for _, x := range u[i:] {
		m0 = max(m0, x)
	}
	return max(m0, m1, m2, m3)
}
