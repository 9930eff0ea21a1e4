//go:build linux

package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkConsoleDay measures 'weir serve' as a browser sees it, on one
// day of 'weir bench gendb' data (1.44M rows: 288 blocks × 5,000 flows,
// seed 1), the binary built from this tree:
//
//   - api-top10-{sip,talk_conv}: GET /api/v1/query, top 10 over the day,
//     one request per iteration over a loopback connection to the
//     running process; p50 and p99 of the requests' wall time.
//   - page-load: one first visit of the console per iteration in Debian's
//     Chromium (test/pageload.mjs, a fresh context each: empty cache); the
//     console opens on the store's last day (the top 10 sources, their
//     series, the totals, the Sankey). first-paint is navigation start to
//     the top-N table and the chart both drawn, from the page's
//     performance marks, split into paint-server (the time before it the
//     server spent on at least one of the page's requests, from their
//     Server-Timing) and paint-browser (the rest: loading and running the
//     scripts, drawing, loopback); ready adds the Sankey; top-query is the
//     browser's Resource Timing of the table's request (since
//     /api/v1/topseries: the top, its series and the totals per bin in one).
//     paint-cpu, paint-script-cpu and ready-cpu are the renderer's main
//     thread CPU time (all its tasks; its scripts) up to the first paint
//     and up to ready, from DevTools' Performance metrics in thread ticks:
//     the browser's own work, which the machine's load inflates far less
//     than the wall times. p50 and max over the loads; -v prints each
//     load's request waterfall.
//
// Each also reports the 1-minute load average at its end (load1): the
// machine's other work, which the wall times include. Run by 'make bench'
// (scripts/bench.sh): go test -run '^$' -bench ConsoleDay -benchtime 10x ./web
func BenchmarkConsoleDay(b *testing.B) {
	node := needBrowser(b)
	tmp := b.TempDir()
	bin := filepath.Join(tmp, "weir")
	run(b, "go", "build", "-o", bin, "../cmd/weir")
	dir := filepath.Join(tmp, "store")
	run(b, bin, "bench", "gendb", "--data-dir", dir, "--days", "1", "--seed", "1", "--no-sync")
	base := "http://" + serve(b, bin, dir)

	for _, c := range []struct{ name, group string }{{"api-top10-sip", "sip"}, {"api-top10-talk_conv", "talk_conv"}} {
		b.Run(c.name, func(b *testing.B) {
			url := base + "/api/v1/query?group=" + c.group + "&limit=10&from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z"
			client := &http.Client{Timeout: 5 * time.Minute}
			get := func() {
				resp, err := client.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				var res struct{ Rows []json.RawMessage }
				err = json.NewDecoder(resp.Body).Decode(&res)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || len(res.Rows) != 10 {
					b.Fatalf("status %d, %d rows, %v", resp.StatusCode, len(res.Rows), err)
				}
			}
			get() // the page cache and the connection, before timing
			var lat []time.Duration
			b.ResetTimer()
			for b.Loop() {
				t := time.Now()
				get()
				lat = append(lat, time.Since(t))
			}
			b.StopTimer()
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			slices.Sort(lat)
			b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
			b.ReportMetric(ms(lat[min(len(lat)-1, len(lat)*99/100)]), "p99-ms")
			b.ReportMetric(loadAverage(b), "load1")
			b.ReportMetric(0, "ns/op") // the percentiles are the numbers
		})
	}

	b.Run("page-load", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(b.N)*5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "test/pageload.mjs")
		cmd.Env = append(os.Environ(), "WEIR_URL="+base, "WEIR_LOADS="+strconv.Itoa(b.N))
		var out syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) } // node and its Chromium
		b.ResetTimer()
		err := cmd.Run()
		b.StopTimer()
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		if err != nil {
			b.Fatalf("%v\n%s", err, out.String())
		}
		if testing.Verbose() {
			b.Logf("the loads' waterfalls:\n%s", out.String())
		}
		metrics := map[string][]float64{}
		for _, m := range regexp.MustCompile(`(?m)^LOAD (\{.*\})$`).FindAllStringSubmatch(out.String(), -1) {
			var l map[string]float64
			if err := json.Unmarshal([]byte(m[1]), &l); err != nil {
				b.Fatal(err)
			}
			for k, v := range l {
				metrics[k] = append(metrics[k], v)
			}
		}
		if len(metrics["first_paint_ms"]) != b.N {
			b.Fatalf("%d loads measured, want %d:\n%s", len(metrics["first_paint_ms"]), b.N, out.String())
		}
		for _, k := range []string{"first_paint_ms", "paint_server_ms", "paint_browser_ms", "ready_ms", "top_query_ms",
			"paint_cpu_ms", "paint_script_cpu_ms", "ready_cpu_ms"} {
			v := metrics[k]
			slices.Sort(v)
			unit := strings.ReplaceAll(strings.TrimSuffix(k, "_ms"), "_", "-")
			b.ReportMetric(v[len(v)/2], unit+"-p50-ms")
			b.ReportMetric(v[len(v)-1], unit+"-max-ms")
		}
		b.ReportMetric(loadAverage(b), "load1")
		b.ReportMetric(0, "ns/op")
	})
}

// loadAverage is the 1-minute load average (/proc/loadavg).
func loadAverage(b *testing.B) float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		b.Fatal(err)
	}
	v, err := strconv.ParseFloat(strings.Fields(string(raw))[0], 64)
	if err != nil {
		b.Fatal(err)
	}
	return v
}
