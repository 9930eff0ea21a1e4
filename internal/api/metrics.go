package api

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/internal/metrics"
)

var (
	descRequests = &metrics.Desc{Name: "weir_api_requests_total", Type: metrics.Counter, Labels: []string{"route", "code"},
		Help: "HTTP requests the API answered, by route and status code."}
	descRejected = &metrics.Desc{Name: "weir_api_queries_rejected_total", Type: metrics.Counter, Labels: []string{"reason"},
		Help: "Queries refused or stopped: busy (no slot, 429), timeout (504), too_large (413)."}
	descRunning = &metrics.Desc{Name: "weir_api_queries_running", Type: metrics.Gauge,
		Help: "Queries and live listings running now."}
	descWaiting = &metrics.Desc{Name: "weir_api_queries_waiting", Type: metrics.Gauge,
		Help: "Queries waiting for a slot now."}
	descQueryTime = &metrics.Desc{Name: "weir_api_query_duration_seconds", Type: metrics.Histogram,
		Help: "Time the backend took to answer a query (slot wait excluded)."}
)

// queryBounds are the histogram's upper bounds, in seconds.
var queryBounds = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

var rejectReasons = []string{"busy", "timeout", "too_large"}

// apiStats are the server's counters.
type apiStats struct {
	s        *Server
	mu       sync.Mutex
	requests map[[2]string]uint64 // route, code → count
	rejected [3]atomic.Uint64     // by rejectReasons
	buckets  [12]atomic.Uint64    // queryBounds and +Inf
	sumNanos atomic.Int64
}

func newStats(s *Server) *apiStats { return &apiStats{s: s, requests: map[[2]string]uint64{}} }

func (st *apiStats) request(route string, code int) {
	if code == 0 {
		code = 200
	}
	st.mu.Lock()
	st.requests[[2]string{route, strconv.Itoa(code)}]++ // routes and codes are few: bounded
	st.mu.Unlock()
}

func (st *apiStats) reject(reason string) {
	st.rejected[slices.Index(rejectReasons, reason)].Add(1)
}

func (st *apiStats) queryTime(d time.Duration) {
	i, _ := slices.BinarySearch(queryBounds, d.Seconds())
	st.buckets[i].Add(1)
	st.sumNanos.Add(int64(d))
}

// Collector returns the API's metrics (docs/metrics.md, "HTTP API").
func (s *Server) Collector() metrics.Collector { return s.stats }

// Describe lists the API's metric families.
func (st *apiStats) Describe() []*metrics.Desc {
	return []*metrics.Desc{descRequests, descRejected, descRunning, descWaiting, descQueryTime}
}

// Collect writes the current values.
func (st *apiStats) Collect(w *metrics.Writer) {
	st.mu.Lock()
	keys := make([][2]string, 0, len(st.requests))
	for k := range st.requests {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		if a[0] != b[0] {
			return strings.Compare(a[0], b[0])
		}
		return strings.Compare(a[1], b[1])
	})
	for _, k := range keys {
		w.Sample(descRequests, float64(st.requests[k]), k[0], k[1])
	}
	st.mu.Unlock()
	for i, r := range rejectReasons {
		w.Sample(descRejected, float64(st.rejected[i].Load()), r)
	}
	w.Sample(descRunning, float64(len(st.s.slots)))
	w.Sample(descWaiting, float64(max(0, st.s.waiting.Load())))
	counts := make([]uint64, len(queryBounds)+1)
	for i := range counts {
		counts[i] = st.buckets[i].Load()
	}
	w.Histogram(descQueryTime, queryBounds, counts, float64(st.sumNanos.Load())/1e9)
}
