package services

import (
	"fmt"
	"testing"
)

// BenchmarkAddLB times the stress script's last step: with N nodes and
// 3,000 load balancers in the group, add one more and put it in the group
// (one transaction), then take it out again so every iteration adds to
// the same model.
func BenchmarkAddLB(b *testing.B) {
	for _, n := range []int{20, 120, 500} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			const lbs = 3000
			m := mustBuild(b, Config{}, n, lbs)
			lb := StressLB(lbs)
			b.ReportAllocs()
			for b.Loop() {
				cs, err := m.Batch(func() error {
					if _, err := m.UpsertLB(lb); err != nil {
						return err
					}
					_, err := m.AddToGroup(StressGroup, lb.Name)
					return err
				})
				if err != nil || len(cs.RowsAdded) != 6 {
					b.Fatalf("%v: %d rows added", err, len(cs.RowsAdded))
				}
				b.StopTimer()
				if _, err := m.Batch(func() error {
					if _, err := m.RemoveFromGroup(StressGroup, lb.Name); err != nil {
						return err
					}
					_, err := m.RemoveLB(lb.Name)
					return err
				}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkRecompute times a full compile of N nodes and 3,000 LBs.
func BenchmarkRecompute(b *testing.B) {
	for _, n := range []int{20, 120, 500} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				mustBuild(b, Config{}, n, 3000)
			}
		})
	}
}
