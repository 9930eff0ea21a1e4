//go:build unix

package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/gendb"
	"github.com/weir-dev/weir/internal/store"
)

// BenchmarkAPITop10Day times GET /api/v1/query for the top 10 of one day
// of gendb data (1.44M rows: 288 blocks × 5,000 flows), over a loopback
// HTTP connection to the API's handler on the embedded store: parsing,
// the query, the JSON, the transfer. It reports the median and 99th
// percentile of the requests' latencies, and the CPU time per request.
func BenchmarkAPITop10Day(b *testing.B) {
	dir := b.TempDir()
	s, err := store.Open(store.Config{Dir: dir, NoSync: true, Writeout: 24 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	err = gendb.Generate(gendb.Config{Days: 1}, func(_ int64, recs []flow.Record) error {
		if err := s.Write(recs); err != nil {
			return err
		}
		return s.Flush()
	})
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	st, err := store.OpenReadOnly(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for _, c := range []struct{ name, params string }{
		{"sip", "group=sip"},
		{"talk_conv", "group=talk_conv"},
		{"dport,proto", "group=dport,proto"},
		// The console's first view (web/src/main.ts): the top 10, their series and the totals per 10-minute bin.
		{"topseries", "group=sip&sort=bytes:sum&resolution=600s"},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv, err := New(Config{Backend: NewStoreBackend(st, nil), NoConsole: true})
			if err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			path := "/api/v1/query?"
			if c.name == "topseries" {
				path = "/api/v1/topseries?"
			}
			url := ts.URL + path + c.params + "&limit=10&from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z"
			get := func() {
				resp, err := ts.Client().Get(url)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			get() // the page cache and the connection, before timing
			var lat []time.Duration
			cpu0 := cpuTime()
			b.ResetTimer()
			for b.Loop() {
				t := time.Now()
				get()
				lat = append(lat, time.Since(t))
			}
			b.StopTimer()
			// CPU per request (server and client in this process): what a
			// query costs whatever else loads the machine.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(len(lat)), "cpu-ms/op")
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
			b.ReportMetric(0, "ns/op") // the percentiles are the numbers
		})
	}
	_ = os.RemoveAll(dir)
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
