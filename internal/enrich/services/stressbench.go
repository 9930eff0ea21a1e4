package services

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weir-dev/weir/internal/format"
)

// StressResult is one configuration of OVN's lb-group-stress measured on
// the model (RunStress): times, sizes and memory.
type StressResult struct {
	Nodes        int     `json:"nodes"`
	LBs          int     `json:"lbs"`
	Groups       bool    `json:"groups"`
	BuildMS      float64 `json:"build_ms"`        // adding the nodes and the M LBs one transaction at a time
	LastAddUS    float64 `json:"last_add_us"`     // the one more LB, first time
	LastAddMedUS float64 `json:"last_add_med_us"` // median of repeated add/remove of it
	RecomputeMS  float64 `json:"recompute_ms"`    // a full compile of the same inputs (median of 3)
	Rows         int     `json:"rows"`
	DPGroups     int     `json:"dp_groups"`
	AddrSets     int     `json:"addr_sets"`
	RowCopies    int     `json:"row_copies"`
	Applied      int     `json:"applied"`
	RSSMB        float64 `json:"rss_mb"`  // resident set after GC, model alive
	HeapMB       float64 `json:"heap_mb"` // Go heap in use after GC
}

// RunStress builds the topology of OVN's lb-group-stress script (n nodes,
// lbs load balancers in one group, each added in its own transaction),
// adds one more and measures that step, repeat add/remove cycles of it,
// a full recompute, and memory after GC. It checks that the incremental
// model and the recompute agree.
func RunStress(n, lbs int, groups bool, repeat int) (StressResult, error) {
	r := StressResult{Nodes: n, LBs: lbs, Groups: groups}
	cfg := Config{NoGroups: !groups}
	m := New(cfg)
	start := time.Now()
	if _, err := m.UpsertGroup(Group{Name: StressGroup}); err != nil {
		return r, err
	}
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i] = StressNode(i)
		if _, err := m.UpsertNode(nodes[i]); err != nil {
			return r, err
		}
	}
	all := make([]LB, 0, lbs+1)
	addOne := func(lb LB) (ChangeSet, error) {
		return m.Batch(func() error {
			if _, err := m.UpsertLB(lb); err != nil {
				return err
			}
			_, err := m.AddToGroup(StressGroup, lb.Name)
			return err
		})
	}
	for j := range lbs {
		lb := StressLB(j)
		all = append(all, lb)
		if _, err := addOne(lb); err != nil {
			return r, err
		}
	}
	r.BuildMS = float64(time.Since(start).Microseconds()) / 1e3

	last := StressLB(lbs)
	t0 := time.Now()
	cs, err := addOne(last)
	r.LastAddUS = float64(time.Since(t0).Nanoseconds()) / 1e3
	if err != nil {
		return r, err
	}
	if want := 6; groups && len(cs.RowsAdded) != want {
		return r, fmt.Errorf("last add changed %d rows, want %d", len(cs.RowsAdded), want)
	}
	all = append(all, last)
	st := m.Stats()
	r.Rows, r.DPGroups, r.AddrSets, r.RowCopies, r.Applied = st.Rows, st.DPGroups, st.AddrSets, st.RowCopies, m.Applied()
	r.RSSMB, r.HeapMB = memAfterGC()

	var adds []time.Duration
	for range repeat {
		if _, err := m.Batch(func() error {
			if _, err := m.RemoveFromGroup(StressGroup, last.Name); err != nil {
				return err
			}
			_, err := m.RemoveLB(last.Name)
			return err
		}); err != nil {
			return r, err
		}
		t := time.Now()
		if _, err := addOne(last); err != nil {
			return r, err
		}
		adds = append(adds, time.Since(t))
	}
	r.LastAddMedUS = float64(median(adds).Nanoseconds()) / 1e3

	var recs []time.Duration
	for range 3 {
		t := time.Now()
		full, err := Build(cfg, nodes, all, []Group{StressGroupOf(lbs + 1)})
		if err != nil {
			return r, err
		}
		recs = append(recs, time.Since(t))
		if fs := full.Stats(); fs.Rows != st.Rows || fs.DPGroups != st.DPGroups {
			return r, fmt.Errorf("recompute: %d rows, %d groups; incremental had %d, %d", fs.Rows, fs.DPGroups, st.Rows, st.DPGroups)
		}
	}
	r.RecomputeMS = float64(median(recs).Microseconds()) / 1e3
	runtime.KeepAlive(m)
	return r, nil
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// memAfterGC returns the resident set (Linux; 0 elsewhere) and the Go heap
// in use, in MB, after a full GC that returns freed memory to the OS.
func memAfterGC() (rss, heap float64) {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap = float64(ms.HeapAlloc) / (1 << 20)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				rss = kb / 1024
			}
		}
	}
	return rss, heap
}

// WriteStressTable writes results as one table, a row per configuration.
func WriteStressTable(w io.Writer, rs []StressResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "nodes\tLBs\tgroups\tlast add µs\tmedian µs\trecompute ms\tbuild ms\trows\tdp groups\trow copies\tapplied\tRSS MB\theap MB\t")
	for _, r := range rs {
		g := "on"
		if !r.Groups {
			g = "off"
		}
		n := func(v int) string { return format.Int(int64(v)) }
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t\n", n(r.Nodes), n(r.LBs), g, r.LastAddUS, r.LastAddMedUS,
			r.RecomputeMS, format.Int(int64(math.Round(r.BuildMS))), n(r.Rows), n(r.DPGroups), n(r.RowCopies), n(r.Applied), r.RSSMB, r.HeapMB)
	}
	tw.Flush()
}
