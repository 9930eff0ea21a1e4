package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"

	"github.com/weir-dev/weir/internal/bench/result"
)

// Metric is one comparable figure of a run.
type Metric struct {
	Name           string
	Unit           string // "bit/s", "/s", "s", "%"
	Value          float64
	HigherIsBetter bool
}

// Metrics flattens a run into named figures that keep their names from run
// to run (interfaces are named by role and network, not by device).
func Metrics(r *result.Run) []Metric {
	var m []Metric
	add := func(name, unit string, v float64, higher bool) {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			m = append(m, Metric{name, unit, v, higher})
		}
	}
	var bytes uint64
	for _, t := range r.Txns {
		bytes += t.Bytes
	}
	if s := r.Elapsed.Seconds(); s > 0 {
		add("throughput", "bit/s", float64(bytes)*8/s, true)
	}
	for _, t := range r.Txns {
		if t.Latency.Count < 2 { // connect and disconnect once: no rate to speak of
			continue
		}
		n := txnName(t.Group, t.Txn, t.GroupName, t.Name)
		add(n+" iter/s", "/s", t.OpsPerSec, true)
		add(n+" latency avg", "s", t.Latency.Avg.Seconds(), false)
		add(n+" latency p50", "s", t.Latency.P50.Seconds(), false)
		add(n+" latency p99", "s", t.Latency.P99.Seconds(), false)
	}
	for _, o := range r.Ops {
		if o.Size == 0 || o.Latency.Count < 2 {
			continue
		}
		n := fmt.Sprintf("g%d/t%d/o%d %s", o.Group, o.Txn, o.Op, opName(r, o))
		add(n+" bytes/s", "B/s", o.BytesPerSec, true)
		add(n+" latency avg", "s", o.Latency.Avg.Seconds(), false)
		add(n+" latency p99", "s", o.Latency.P99.Seconds(), false)
	}
	for _, n := range r.NICs {
		p := "NIC " + n.Host + "/" + n.Net
		add(p+" rx bit/s", "bit/s", n.RxBitsPS, true)
		add(p+" tx bit/s", "bit/s", n.TxBitsPS, true)
		add(p+" rx pkt/s", "pps", n.RxPktsPS, true)
		add(p+" tx pkt/s", "pps", n.TxPktsPS, true)
	}
	for _, c := range r.CPU {
		add("CPU "+c.Side, "%", c.Percent, false)
	}
	if c := r.Calibrate; c != nil {
		if i := c.Iperf3; i != nil {
			add("iperf3 TCP stream", "bit/s", i.BitsPerSec, true)
			add("weir TCP stream (iperf3 shape)", "bit/s", i.WeirBitsPerSec, true)
		}
		if s := c.Sockperf; s != nil {
			add("sockperf ping-pong avg RTT", "s", s.AvgRTT.Seconds(), false)
			add("weir ping-pong avg RTT (sockperf shape)", "s", s.WeirAvgRTT.Seconds(), false)
		}
	}
	return m
}

// Row is one metric across runs.
type Row struct {
	Metric Metric    // the baseline's
	Values []float64 // per run; NaN when a run lacks it
	Change []float64 // per run after the first: % change from the baseline
	Noise  bool      // some change is within the runs' own noise
	Note   string
}

// Comparison is runs side by side, the first being the baseline.
type Comparison struct {
	Runs     []*result.Run
	Labels   []string  // per run: its profile file or index
	CV       []float64 // per run: coefficient of variation of its traffic per interval (NaN: too few)
	Rows     []Row
	Warnings []string // the runs differ in profile, host or options
}

// MinIntervals is how many inner intervals a run needs for a noise figure.
const MinIntervals = 4

// Compare puts runs side by side; runs[0] is the baseline.
func Compare(runs []*result.Run) *Comparison {
	c := &Comparison{Runs: runs}
	if len(runs) == 0 {
		return c
	}
	for i, r := range runs {
		c.Labels = append(c.Labels, fmt.Sprintf("%c", 'A'+i%26))
		c.CV = append(c.CV, cv(r.Intervals))
	}
	byName := make([]map[string]float64, len(runs))
	for i, r := range runs {
		byName[i] = map[string]float64{}
		for _, m := range Metrics(r) {
			byName[i][m.Name] = m.Value
		}
	}
	for _, m := range Metrics(runs[0]) {
		row := Row{Metric: m}
		for i := range runs {
			v, ok := byName[i][m.Name]
			if !ok {
				v = math.NaN()
			}
			row.Values = append(row.Values, v)
			if i == 0 {
				continue
			}
			ch := math.NaN()
			if m.Value != 0 && !math.IsNaN(v) {
				ch = 100 * (v - m.Value) / m.Value
			}
			row.Change = append(row.Change, ch)
			noise := 2 * 100 * math.Max(c.CV[0], c.CV[i])
			switch {
			case math.IsNaN(ch):
			case math.IsNaN(noise):
				row.Note = "noise unknown"
			case math.Abs(ch) < noise:
				row.Noise, row.Note = true, "within noise"
			case row.Note == "":
				if (ch > 0) == m.HigherIsBetter {
					row.Note = "better"
				} else {
					row.Note = "worse"
				}
			}
		}
		c.Rows = append(c.Rows, row)
	}
	c.Warnings = differences(runs)
	return c
}

// cv is the coefficient of variation of bytes per interval, leaving out
// the first and the last interval (ramp up and down).
func cv(iv []result.Interval) float64 {
	if len(iv) < MinIntervals+2 {
		return math.NaN()
	}
	in := iv[1 : len(iv)-1]
	var sum, sq float64
	for _, x := range in {
		sum += float64(x.Bytes)
	}
	mean := sum / float64(len(in))
	if mean == 0 {
		return math.NaN()
	}
	for _, x := range in {
		d := float64(x.Bytes) - mean
		sq += d * d
	}
	return math.Sqrt(sq/float64(len(in)-1)) / mean
}

// differences lists what makes the runs unlike each other besides the code.
func differences(runs []*result.Run) []string {
	var w []string
	base := runs[0]
	pj := func(r *result.Run) string { b, _ := json.Marshal(r.Profile); return string(b) }
	for i, r := range runs[1:] {
		l := fmt.Sprintf("%c", 'B'+i%25)
		if pj(r) != pj(base) {
			w = append(w, fmt.Sprintf("run %s ran another profile than A (%s vs %s)", l, name(r), name(base)))
		}
		if r.Host.CPUModel != base.Host.CPUModel || r.Host.CPUs != base.Host.CPUs || r.Host.Kernel != base.Host.Kernel || r.Host.MemBytes != base.Host.MemBytes {
			w = append(w, fmt.Sprintf("run %s ran on another host: %s, %d cpus, kernel %s (A: %s, %d cpus, kernel %s)", l,
				r.Host.CPUModel, r.Host.CPUs, r.Host.Kernel, base.Host.CPUModel, base.Host.CPUs, base.Host.Kernel))
		}
		if !reflect.DeepEqual(r.Options, base.Options) {
			w = append(w, fmt.Sprintf("run %s had other options: %+v (A: %+v)", l, r.Options, base.Options))
		}
	}
	return w
}

func name(r *result.Run) string {
	if r.Profile == nil {
		return "?"
	}
	return r.Profile.Name
}

// value formats a metric value in its unit.
func value(v float64, unit string) string {
	if math.IsNaN(v) {
		return "-"
	}
	switch unit {
	case "s":
		return dur(secondsDur(v))
	case "%":
		return fmt.Sprintf("%.1f%%", v)
	case "/s":
		return si(v, "/s")
	}
	return si(v, unit)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", v)
}

// WriteCompare prints the before/after table.
func WriteCompare(w io.Writer, c *Comparison) error {
	var b strings.Builder
	for i, r := range c.Runs {
		noise := "unknown (too few intervals)"
		if !math.IsNaN(c.CV[i]) {
			noise = fmt.Sprintf("±%.1f%% per interval", 100*c.CV[i])
		}
		fmt.Fprintf(&b, "%s: %s (%s), weir %s, %s; noise %s\n", c.Labels[i], name(r), r.ProfileFile, r.WeirVersion, r.Started.Format("2006-01-02 15:04"), noise)
	}
	for _, x := range c.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", x)
	}
	b.WriteString("\n")
	t := &table{}
	head := []string{"metric"}
	head = append(head, c.Labels...)
	for _, l := range c.Labels[1:] {
		head = append(head, "Δ"+l)
	}
	t.add(append(head, "note")...)
	noisy := false
	for _, r := range c.Rows {
		cells := []string{r.Metric.Name}
		for _, v := range r.Values {
			cells = append(cells, value(v, r.Metric.Unit))
		}
		for _, ch := range r.Change {
			cells = append(cells, pct(ch))
		}
		note := r.Note
		if r.Noise {
			note += " *"
			noisy = true
		}
		t.add(append(cells, note)...)
	}
	var tb strings.Builder
	_ = t.write(&tb) // a strings.Builder does not fail
	b.WriteString(tb.String())
	if noisy {
		b.WriteString("* the change is smaller than twice the runs' own spread (coefficient of variation of the traffic\n  per interval, first and last left out): rerun, or run longer, before reading anything into it.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
