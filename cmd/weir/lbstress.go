package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weir-dev/weir/internal/enrich/services"
)

// lbResult is one lbstress configuration's numbers (one JSON line per run).
type lbResult struct {
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

func runLBStress(args []string, stdout, stderr io.Writer) int {
	var (
		nodesFlag string
		lbs       int
		groups    string
		repeat    int
		asJSON    bool
	)
	fs := newFlagSet("bench lbstress", "weir bench lbstress [--nodes N,...] [--lbs M] [flags]",
		`Rebuild the topology of OVN's lb-group-stress script in weir's service
model: per node a switch ls<i> and a gateway router lr<i>, both attached to
one load-balancer group; M TCP load balancers, VIP 42.<j/255>.<j%255>.1:8080
with one backend, each added and put in the group in one transaction. Then
add one more and report the time of that last incremental step, the time of
a full recompute, resident memory and Go heap after GC, rows and datapath
groups; with --groups off (or both) the same without datapath groups, where
rows are copied per datapath (the N x M blow-up). Times are compute and
change set only: OVN's published loop times also include its database
transaction. Each configuration runs in a fresh process so memory figures
do not mix.`, `  weir bench lbstress --nodes 20,120,250,500 --lbs 3000
  weir bench lbstress --nodes 120 --groups on --json
`)
	fs.StringVar(&nodesFlag, "nodes", "20,120,250,500", "node counts, comma-separated")
	fs.IntVar(&lbs, "lbs", 3000, "load balancers added before the measured one")
	fs.StringVar(&groups, "groups", "both", "datapath groups: on, off or both")
	fs.IntVar(&repeat, "repeat", 50, "add/remove repetitions for the median last-add time")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object per configuration instead of the table")
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	var ns []int
	for _, f := range strings.Split(nodesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 100000 {
			fmt.Fprintf(stderr, "weir bench lbstress: --nodes: bad count %q\n", f)
			return exitUsage
		}
		ns = append(ns, n)
	}
	var modes []bool
	switch groups {
	case "on":
		modes = []bool{true}
	case "off":
		modes = []bool{false}
	case "both":
		modes = []bool{true, false}
	default:
		fmt.Fprintf(stderr, "weir bench lbstress: --groups must be on, off or both\n")
		return exitUsage
	}
	if lbs < 1 || lbs > 65000 || repeat < 1 {
		fmt.Fprintf(stderr, "weir bench lbstress: --lbs must be 1…65000 and --repeat ≥ 1\n")
		return exitUsage
	}
	var results []lbResult
	for _, g := range modes {
		for _, n := range ns {
			var r lbResult
			var err error
			if len(ns)*len(modes) == 1 {
				r, err = lbStressOne(n, lbs, g, repeat)
			} else {
				r, err = lbStressChild(n, lbs, g, repeat)
			}
			if err != nil {
				fmt.Fprintf(stderr, "weir bench lbstress: nodes=%d groups=%v: %v\n", n, g, err)
				return exitFailure
			}
			if asJSON {
				b, _ := json.Marshal(r)
				fmt.Fprintf(stdout, "%s\n", b)
			}
			results = append(results, r)
		}
	}
	if !asJSON {
		writeLBTable(stdout, results)
	}
	return exitOK
}

// lbStressChild runs one configuration in a fresh weir process.
func lbStressChild(n, lbs int, groups bool, repeat int) (lbResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return lbResult{}, err
	}
	g := "on"
	if !groups {
		g = "off"
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(exe, "bench", "lbstress", "--json", "--nodes", strconv.Itoa(n), "--lbs", strconv.Itoa(lbs), "--groups", g, "--repeat", strconv.Itoa(repeat))
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return lbResult{}, fmt.Errorf("%v: %s", err, strings.TrimSpace(errb.String()))
	}
	var r lbResult
	sc := bufio.NewScanner(&out)
	if !sc.Scan() {
		return r, fmt.Errorf("child printed nothing")
	}
	return r, json.Unmarshal(sc.Bytes(), &r)
}

// lbStressOne builds the topology as the script does, then measures.
func lbStressOne(n, lbs int, groups bool, repeat int) (lbResult, error) {
	r := lbResult{Nodes: n, LBs: lbs, Groups: groups}
	cfg := services.Config{NoGroups: !groups}
	m := services.New(cfg)
	start := time.Now()
	if _, err := m.UpsertGroup(services.Group{Name: services.StressGroup}); err != nil {
		return r, err
	}
	nodes := make([]services.Node, n)
	for i := range nodes {
		nodes[i] = services.StressNode(i)
		if _, err := m.UpsertNode(nodes[i]); err != nil {
			return r, err
		}
	}
	all := make([]services.LB, 0, lbs+1)
	addOne := func(lb services.LB) (services.ChangeSet, error) {
		return m.Batch(func() error {
			if _, err := m.UpsertLB(lb); err != nil {
				return err
			}
			_, err := m.AddToGroup(services.StressGroup, lb.Name)
			return err
		})
	}
	for j := range lbs {
		lb := services.StressLB(j)
		all = append(all, lb)
		if _, err := addOne(lb); err != nil {
			return r, err
		}
	}
	r.BuildMS = float64(time.Since(start).Microseconds()) / 1e3

	last := services.StressLB(lbs)
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
			if _, err := m.RemoveFromGroup(services.StressGroup, last.Name); err != nil {
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
		full, err := services.Build(cfg, nodes, all, []services.Group{services.StressGroupOf(lbs + 1)})
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

func writeLBTable(w io.Writer, rs []lbResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "nodes\tLBs\tgroups\tlast add µs\tmedian µs\trecompute ms\tbuild ms\trows\tdp groups\trow copies\tapplied\tRSS MB\theap MB\t")
	for _, r := range rs {
		g := "on"
		if !r.Groups {
			g = "off"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%.1f\t%.1f\t%.1f\t%.0f\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t\n", r.Nodes, r.LBs, g, r.LastAddUS, r.LastAddMedUS,
			r.RecomputeMS, r.BuildMS, r.Rows, r.DPGroups, r.RowCopies, r.Applied, r.RSSMB, r.HeapMB)
	}
	tw.Flush()
}
