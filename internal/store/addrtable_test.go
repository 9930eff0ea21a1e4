package store

import (
	"math/rand/v2"
	"testing"
)

// TestAddrTableGrows: build gives the distinct addresses in first-
// appearance order, their counts and every row's index, as a map does,
// across the table's doublings (few to all-distinct rows) and reuse of
// one table for blocks of other sizes.
func TestAddrTableGrows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var tab addrTable
	for _, c := range []struct{ rows, distinct int }{{5000, 1}, {5000, 300}, {5000, 2000}, {5000, 5000}, {20000, 15000}, {10, 10}, {0, 0}, {3000, 2999}} {
		pool := make([][16]byte, max(c.distinct, 1))
		for i := range pool {
			if i%7 == 0 {
				for j := range pool[i] {
					pool[i][j] = byte(r.Uint32())
				}
			} else {
				pool[i] = [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)}
			}
		}
		v := make([][16]byte, c.rows)
		for i := range v {
			v[i] = pool[r.IntN(len(pool))]
		}
		tab.build(v)
		at := map[[16]byte]int{}
		var dict [][16]byte
		var count []uint32
		for i, a := range v {
			k, ok := at[a]
			if !ok {
				k = len(dict)
				at[a] = k
				dict = append(dict, a)
				count = append(count, 0)
			}
			count[k]++
			if tab.idx[i] != uint64(k) {
				t.Fatalf("%+v: row %d index %d, want %d", c, i, tab.idx[i], k)
			}
		}
		if len(tab.dict) != len(dict) {
			t.Fatalf("%+v: %d distinct, want %d", c, len(tab.dict), len(dict))
		}
		for k := range dict {
			if tab.dict[k] != dict[k] || tab.count[k] != count[k] {
				t.Fatalf("%+v: entry %d %x ×%d, want %x ×%d", c, k, tab.dict[k], tab.count[k], dict[k], count[k])
			}
		}
	}
}
