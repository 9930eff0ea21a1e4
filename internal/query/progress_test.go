package query

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
)

// Query.Progress is told of every block read, the last call saying all
// are done, from several workers at once; partitioned workers (many
// groups) each read every block, and the total says so.
func TestProgress(t *testing.T) {
	st := writeStore(t, randRecords(rand.New(rand.NewPCG(3, 4)), 2000), 100)
	defer st.Close()
	for _, group := range []string{"proto", "sip,dip,sport,dport"} {
		g, err := ParseGroupBy(group)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		calls, last, total := 0, 0, 0
		q := &Query{Group: g, Workers: 3, Progress: func(done, tot int) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			last, total = max(last, done), tot
		}}
		res, err := Run(context.Background(), st, q, nil)
		if err != nil {
			t.Fatal(err)
		}
		read := res.Stats.Blocks - res.Stats.BlocksCorrupt
		if manyGroups(g) {
			read *= 3
		}
		if calls != read || last != read || total != read || read == 0 {
			t.Errorf("%s: %d calls, last done %d of %d; %d block reads", group, calls, last, total, read)
		}
	}
}
