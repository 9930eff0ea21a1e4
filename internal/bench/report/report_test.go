package report

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/bench/profile"
	"github.com/weir-dev/weir/internal/bench/result"
)

// fakeRun is a realistic run: a request-response profile whose main
// transaction moves bytesPerSec with the given spread between intervals.
func fakeRun(rate float64, spread float64, p99 time.Duration) *result.Run {
	p := &profile.Profile{Name: "rr", Groups: []profile.Group{{Name: "tcp", Threads: 2, Txns: []profile.Txn{
		{Iterations: 1, Ops: []profile.Op{{Kind: profile.Connect, Proto: profile.TCP}}},
		{Duration: 2 * time.Second, Ops: []profile.Op{{Kind: profile.Write, Size: 64, Count: 1}, {Kind: profile.Read, Size: 1024, Count: 2}}},
		{Iterations: 1, Ops: []profile.Op{{Kind: profile.Disconnect}}},
	}}}}
	r := &result.Run{Schema: result.Schema, WeirVersion: "v1", Started: time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC), Profile: p, ProfileFile: "rr.yaml",
		Host:    result.HostFacts{Hostname: "h", CPUModel: "Xeon", CPUs: 2, Kernel: "6.1", MemBytes: 1 << 34, GoVersion: "go1.26"},
		Options: result.Options{Pairs: 1, Hub: "bridge", Offloads: true, MTU: 1500},
		Elapsed: 2 * time.Second}
	iters := uint64(rate * 2 / (64 + 2048))
	r.Txns = []result.TxnStats{
		{Group: 0, Txn: 0, GroupName: "tcp", Latency: result.Latency{Count: 2, Avg: 300 * time.Microsecond, P50: 300 * time.Microsecond, P99: 310 * time.Microsecond, Min: 290 * time.Microsecond, Max: 310 * time.Microsecond}},
		{Group: 0, Txn: 1, GroupName: "tcp", Latency: result.Latency{Count: iters, Avg: p99 / 3, P50: p99 / 4, P99: p99, Min: p99 / 10, Max: 2 * p99}, Bytes: iters * 2112, Wall: 2 * time.Second, BytesPerSec: rate, OpsPerSec: float64(iters) / 2},
		{Group: 0, Txn: 2, GroupName: "tcp", Latency: result.Latency{Count: 2, Avg: time.Millisecond, P50: time.Millisecond, P99: time.Millisecond, Min: time.Millisecond, Max: time.Millisecond}},
	}
	r.Ops = []result.OpStats{
		{Group: 0, Txn: 0, Op: 0, Kind: "connect", Proto: "tcp", Latency: r.Txns[0].Latency},
		{Group: 0, Txn: 1, Op: 0, Kind: "write", Size: 64, Latency: result.Latency{Count: iters, Avg: 5 * time.Microsecond, P50: 4 * time.Microsecond, P99: 20 * time.Microsecond, Min: time.Microsecond, Max: time.Millisecond}, Bytes: iters * 64, BytesPerSec: float64(iters*64) / 2, OpsPerSec: float64(iters) / 2},
		{Group: 0, Txn: 1, Op: 1, Kind: "read", Size: 1024, Latency: result.Latency{Count: 2 * iters, Avg: 50 * time.Microsecond, P50: 40 * time.Microsecond, P99: 200 * time.Microsecond, Min: time.Microsecond, Max: time.Millisecond}, Bytes: iters * 2048, BytesPerSec: float64(iters*2048) / 2, OpsPerSec: float64(iters)},
	}
	r.NICs = []result.NICStats{
		{Host: "server", Iface: "tb1-0h0", Net: "primary", RxPackets: 1000, TxPackets: 2000, RxPktsPS: 500, TxPktsPS: 1000, RxBitsPS: 8e5, TxBitsPS: 1.6e7},
		{Host: "client1", Iface: "tb1-0h1", Net: "primary", RxPackets: 2000, TxPackets: 1000, RxPktsPS: 1000, TxPktsPS: 500, RxBitsPS: 1.6e7, TxBitsPS: 8e5},
	}
	r.CPU = []result.SideCPU{{Side: "server", User: 100 * time.Millisecond, System: 900 * time.Millisecond, Percent: 50}, {Side: "clients", User: 200 * time.Millisecond, System: time.Second, Percent: 60}}
	for i := range 20 {
		var f float64
		if i%2 == 1 {
			f = 1 + spread
		} else {
			f = 1 - spread
		}
		r.Intervals = append(r.Intervals, result.Interval{Start: time.Duration(i) * 100 * time.Millisecond, Len: 100 * time.Millisecond, Bytes: uint64(rate / 10 * f), Iters: iters / 20})
	}
	return r
}

// Every table's rows start their columns at the same places.
func TestWriteRunAligned(t *testing.T) {
	r := fakeRun(1e6, 0.01, 400*time.Microsecond)
	r.Observe = []result.Observed{{Mode: "afpacket", Where: "ns:if", Conns: 2, Matched: 1, NICPkts: 10, SeenPkts: 9, Diffs: []string{"tcp a → b: packets sent 5/5, seen 4/5"}}}
	r.Calibrate = &result.Calibration{Iperf3: &result.Iperf3{Streams: 1, WriteSize: 128 << 10, BitsPerSec: 1e10, WeirBitsPerSec: 9.5e9, Ratio: 0.95},
		Sockperf: &result.Sockperf{Proto: "udp", MsgSize: 64, AvgRTT: 50 * time.Microsecond, WeirAvgRTT: 52 * time.Microsecond, Ratio: 1.04, P50RTT: 48 * time.Microsecond, P99RTT: 90 * time.Microsecond}}
	var b bytes.Buffer
	if err := WriteRun(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"g0/t1 tcp", "read 1.00 KiB ×2", "133", "9.50 Gbit/s", "0.950", "52.0µs", "packets sent 5/5, seen 4/5", "afpacket", "server", "tb1-0h0", "50.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Within a block of lines (a table), right-aligned columns end at the
	// same offsets.
	for _, block := range strings.Split(out, "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if len(lines) < 3 || strings.Contains(lines[0], ",") {
			continue
		}
		ends := func(l string) []int {
			var e []int
			for _, m := range regexp.MustCompile(`\S(  |$)`).FindAllStringIndex(l, -1) {
				e = append(e, len([]rune(l[:m[0]+1])))
			}
			return e
		}
		want := ends(lines[1])
		for _, l := range lines[2:] {
			got := ends(l)
			if len(got) == len(want) && got[len(got)-1] != want[len(want)-1] {
				t.Errorf("%q ends at %v, header at %v", l, got, want)
			}
		}
	}
}

func TestCompare(t *testing.T) {
	a := fakeRun(1e6, 0.01, 400*time.Microsecond)
	b := fakeRun(1.2e6, 0.01, 300*time.Microsecond)
	c := Compare([]*result.Run{a, b})
	var tput, p99 *Row
	for i := range c.Rows {
		switch c.Rows[i].Metric.Name {
		case "throughput":
			tput = &c.Rows[i]
		case "g0/t1 tcp latency p99":
			p99 = &c.Rows[i]
		}
	}
	if tput == nil || p99 == nil {
		t.Fatalf("rows %+v", c.Rows)
	}
	if math.Abs(p99.Change[0]-(-25)) > 1e-9 || p99.Note != "better" || p99.Noise {
		t.Errorf("p99 row %+v", *p99)
	}
	if tput.Change[0] <= 0 || tput.Note != "better" {
		t.Errorf("throughput row %+v", *tput)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings %v", c.Warnings)
	}
	// Noisy runs: a 20% spread hides a 10% change.
	n1, n2 := fakeRun(1e6, 0.2, time.Millisecond), fakeRun(1.1e6, 0.2, 900*time.Microsecond)
	n2.Host.Kernel = "6.2"
	n2.Options.Pairs = 2
	cn := Compare([]*result.Run{n1, n2})
	for _, r := range cn.Rows {
		if r.Metric.Name == "throughput" && (!r.Noise || r.Note != "within noise") {
			t.Errorf("noisy throughput %+v", r)
		}
	}
	if len(cn.Warnings) != 2 {
		t.Errorf("warnings %v", cn.Warnings)
	}
	var out bytes.Buffer
	WriteCompare(&out, cn)
	if !strings.Contains(out.String(), "within noise *") || !strings.Contains(out.String(), "another host") || !strings.Contains(out.String(), "+10.0%") {
		t.Errorf("compare output:\n%s", out.String())
	}
	// Too few intervals: no noise figure, said so.
	n1.Intervals = n1.Intervals[:3]
	if c := Compare([]*result.Run{n1, n2}); !math.IsNaN(c.CV[0]) || c.Rows[0].Note != "noise unknown" {
		t.Errorf("few intervals: cv %v note %q", c.CV[0], c.Rows[0].Note)
	}
	if c := Compare(nil); len(c.Rows) != 0 {
		t.Error("no runs")
	}
}

// The HTML report opened in headless Chromium: three charts with a bar or
// point per run and value, and one table row per metric.
func TestHTMLInChromium(t *testing.T) {
	runs := []*result.Run{fakeRun(1e6, 0.02, 400*time.Microsecond), fakeRun(1.3e6, 0.02, 350*time.Microsecond), fakeRun(0.9e6, 0.02, 500*time.Microsecond)}
	runs[2].Profile.Name = `<script>alert("x")</script>`
	c := Compare(runs)
	dir := t.TempDir()
	file := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := WriteHTML(&b, c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `<script>alert`) || strings.Contains(b.String(), "http://") && !strings.Contains(b.String(), `xmlns="http://www.w3.org/2000/svg"`) {
		t.Fatal("unescaped input or an external reference")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is missing; scripts/deps.sh installs it")
		}
		t.Skip("chromium is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--user-data-dir="+filepath.Join(dir, "profile"),
		"--no-first-run", "--disable-extensions", "--dump-dom", "file://"+file)
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	s := string(dom)
	countIn := func(id, pattern string) int {
		i := strings.Index(s, `id="`+id+`"`)
		if i < 0 {
			t.Fatalf("the DOM has no %s", id)
		}
		j := strings.Index(s[i:], "</svg>")
		return len(regexp.MustCompile(pattern).FindAllString(s[i:i+j], -1))
	}
	if n := countIn("chart-throughput", `<rect class="bar" data-run="[ABC]"`); n != 3 {
		t.Errorf("throughput chart: %d bars, want 3", n)
	}
	if n := countIn("chart-latency", `<rect class="bar" data-run="[ABC]" data-stat="(avg|p50|p99)"`); n != 9 {
		t.Errorf("latency chart: %d bars, want 9", n)
	}
	if n := countIn("chart-timeline", `<circle class="point" data-run="[ABC]"`); n != 60 {
		t.Errorf("timeline chart: %d points, want 60", n)
	}
	if n := strings.Count(s, `<tr class="metric">`); n != len(c.Rows) {
		t.Errorf("table: %d rows, want %d", n, len(c.Rows))
	}
	var tb float64
	for _, m := range Metrics(runs[1]) {
		if m.Name == "throughput" {
			tb = m.Value
		}
	}
	if !strings.Contains(s, fmt.Sprintf(`data-run="B" data-value="%g"`, tb)) {
		t.Errorf("B's throughput bar value missing")
	}
	if !strings.Contains(s, "&lt;script&gt;") {
		t.Errorf("the hostile profile name is not shown escaped")
	}
}

// The report's look is the console's: it embeds the console's built
// stylesheet byte for byte (the file web/dist/manifest.json hashes as
// app.css, the one 'weir serve' sends), and draws its series in the
// stylesheet's --series-N colours rather than colours of its own.
func TestHTMLEmbedsConsoleStylesheet(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, Compare([]*result.Run{fakeRun(1e6, 0.02, 400*time.Microsecond), fakeRun(1.3e6, 0.02, 350*time.Microsecond)})); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	m := regexp.MustCompile(`(?s)<style id="console-css">(.*?)</style>`).FindStringSubmatch(s)
	if m == nil {
		t.Fatal("the report has no console stylesheet")
	}
	var manifest struct{ Files map[string]string }
	mb, err := os.ReadFile("../../../web/dist/manifest.json")
	if err == nil {
		err = json.Unmarshal(mb, &manifest)
	}
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte(m[1])); hex.EncodeToString(sum[:]) != manifest.Files["app.css"] {
		t.Errorf("the report's stylesheet (%d B) is not the console's built app.css", len(m[1]))
	}
	if !strings.Contains(m[1], "--series-1:") || !strings.Contains(m[1], `[data-theme=dark]`) {
		t.Error("the console stylesheet defines no series colours or no dark theme")
	}
	if !strings.Contains(s, `style="fill:var(--series-1)"`) || regexp.MustCompile(`fill="#`).MatchString(s) {
		t.Error("the charts do not use the stylesheet's series colours")
	}
}
