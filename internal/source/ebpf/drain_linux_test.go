//go:build linux

package ebpf

import (
	"os"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/testhost"
)

// TestDrainBatchTime: a batch drain counts every entry and reports the
// time of its kernel calls as a part of the drain (BatchTime within
// EvictTime minus SwapTime); the per-key drain reports none.
func TestDrainBatchTime(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("eBPF needs root (CAP_BPF); CI runs this as root")
	}
	const n = 20_000
	pr := testhost.NewPair(t)
	keys, vals := fillKeys(n)
	for _, batch := range []bool{true, false} {
		s := benchSource(t, pr.B, Config{MaxFlows: n, EvictInterval: time.Hour, Table: flow.Config{MaxFlows: 4 * n, IdleTimeout: 2 * time.Hour}})
		if batch && !s.batchOK {
			t.Skip("no batch lookup-and-delete on this kernel")
		}
		s.batchOK = batch
		if _, err := s.maps[s.cur].BatchUpdate(keys, vals, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.evict(ReasonTimer); err != nil {
			t.Fatal(err)
		}
		st := s.Stats()
		if got := st.Evicted[SourceHashmap][ReasonTimer]; got != n {
			t.Fatalf("batch %v: drained %d entries, want %d", batch, got, n)
		}
		drain := st.EvictTime - st.SwapTime
		switch {
		case batch && (st.BatchTime <= 0 || st.BatchTime > drain):
			t.Fatalf("batch drain: BatchTime %v, want in (0, %v]", st.BatchTime, drain)
		case !batch && st.BatchTime != 0:
			t.Fatalf("per-key drain: BatchTime %v, want 0", st.BatchTime)
		}
	}
}
