// Command benchsum prints the median of every metric of every benchmark in
// `go test -bench` output files, one row per benchmark, and checks the
// goals weir holds itself to (docs/benchmarks.md). It is what `make bench`
// prints; use benchstat to compare two runs.
//
//	go run ./internal/tools/benchsum build/bench/*.txt
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// goal is an upper bound on a benchmark's median metric.
type goal struct {
	pattern *regexp.Regexp
	metric  string
	max     float64
}

var goals = []goal{
	{regexp.MustCompile(`^BenchmarkUpdate/flows=10k/`), "ns/op", 25},
	{regexp.MustCompile(`^BenchmarkUpdate/flows=1M/`), "ns/op", 100},
	{regexp.MustCompile(`^BenchmarkUpdate/`), "B/slot", 96},
	{regexp.MustCompile(`^Benchmark(Update|Decode|Pipeline|Replay|ReadPcap|AppendJSON)`), "allocs/op", 0},
	{regexp.MustCompile(`^BenchmarkKernel/(ingress|egress)/flows=64$`), "ns/op", 120},
	{regexp.MustCompile(`^BenchmarkEvict/entries=100k$`), "ns/op", 30e6},
	{regexp.MustCompile(`^BenchmarkLiveCapture/`), "weir/nfpcapd", 0.8},
	{regexp.MustCompile(`^BenchmarkLiveCapture/`), "weir-kernel-drops", 0},
	{regexp.MustCompile(`^BenchmarkLiveCapture/`), "weir-missed", 0},
	{regexp.MustCompile(`^BenchmarkAntreaCycle/mtu=1400$`), "ns/op", 0.34e6}, // 10x Antrea v2.4.0's 3.36 ms (issue 26)
}

var procSuffix = regexp.MustCompile(`-\d+$`)

func main() {
	samples := map[string]map[string][]float64{} // bench → metric → values
	var order []string
	for _, path := range os.Args[1:] {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchsum:", err)
			os.Exit(1)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
				continue
			}
			name := procSuffix.ReplaceAllString(fields[0], "")
			if samples[name] == nil {
				samples[name] = map[string][]float64{}
				order = append(order, name)
			}
			for i := 2; i+1 < len(fields); i += 2 {
				v, err := strconv.ParseFloat(fields[i], 64)
				if err != nil {
					break
				}
				samples[name][fields[i+1]] = append(samples[name][fields[i+1]], v)
			}
		}
		f.Close()
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "benchmark\truns\tns/op\tB/op\tallocs/op\tother (median)\tgoal\t")
	failed := 0
	for _, name := range order {
		m := samples[name]
		var other []string
		for k := range m {
			if k != "ns/op" && k != "B/op" && k != "allocs/op" {
				other = append(other, fmt.Sprintf("%s %s", num(median(m[k])), k))
			}
		}
		sort.Strings(other)
		verdict := ""
		for _, g := range goals {
			if v, ok := m[g.metric]; ok && g.pattern.MatchString(name) {
				ok := median(v) <= g.max
				mark := "ok"
				if !ok {
					mark = "MISSED"
					failed++
				}
				verdict += fmt.Sprintf("%s ≤ %s %s; ", g.metric, num(g.max), mark)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", name, len(m["ns/op"]),
			num(median(m["ns/op"])), num(median(m["B/op"])), num(median(m["allocs/op"])),
			strings.Join(other, ", "), strings.TrimSuffix(verdict, "; "))
	}
	tw.Flush()
	if failed > 0 {
		fmt.Printf("\n%d goal(s) missed on this run (this machine is shared: rerun before believing it)\n", failed)
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func num(v float64) string {
	switch {
	case v == float64(int64(v)):
		return strconv.FormatInt(int64(v), 10)
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}
