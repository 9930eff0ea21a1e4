package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/weir-dev/weir/internal/query"
)

// compactElapsed is the elapsed time in compact JSON: it differs from
// one run of a query to the next.
var compactElapsed = regexp.MustCompile(`"elapsed_ms":[-+.e0-9]+`)

// noBinTotals is a backend that does not sum per bin beside a query (as
// ClickHouse): /api/v1/topseries then asks the totals per bin itself.
type noBinTotals struct{ Backend }

func (b noBinTotals) Query(ctx context.Context, q *query.Query, live bool) (*query.Result, error) {
	res, err := b.Backend.Query(ctx, q, live)
	if res != nil {
		res.BinTotals = nil
	}
	return res, err
}

// TestTopSeries: /api/v1/topseries' three parts are byte for byte (but
// the elapsed time) /api/v1/query's answers for the same parameters: the
// top without resolution, the totals grouped by time at resolution
// without a limit, the series grouped by the groups and time under its
// condition; the series of each top row add up to that row and the bins
// to the totals; a backend without bin totals answers the same; an empty
// top has a null series.
func TestTopSeries(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	_, tsPlain := newTestServer(t, Config{Backend: noBinTotals{NewStoreBackend(smallStore(t), nil)}})
	for _, c := range []struct {
		params string
		series string // how the store's series came (Server-Timing): kept from the top's pass, read again, none
	}{
		{"group=sip&resolution=1h", "kept"},
		{"group=talk_conv&condition=dport+%3D+443&limit=5&resolution=10m", "read"}, // two addresses: partitioned workers
		{"group=dport,proto&sort=packets:in&ascending=true&resolution=6h&from=2026-01-01T06:00:00Z&to=2026-01-02T03:30:00Z", "kept"},
		{"group=dip&iface=eth1&sort=flows&resolution=1h", "kept"},
		{"group=sip&condition=dport+%3D+1&resolution=1h", "none"},                           // nothing matches
		{"group=sip&condition=sip+%3D+%3A%3A%2F0&sort=flows&limit=4&resolution=2h", "kept"}, // IPv6 sources, ranked by flows: ties
		{"group=proto&sort=flows&ascending=true&resolution=30m&from=2026-01-01T05:17:00Z&to=2026-01-01T13:44:00Z", "kept"},
		{"group=iface&resolution=10m", "kept"},
		{"group=node&limit=3&resolution=1h", "kept"},
		{"group=dip,sport&limit=3&resolution=1h", "read"},
		{"group=sip&resolution=1h&from=2030-01-01T00:00:00Z&to=2030-01-02T00:00:00Z", "none"}, // an empty range
		{"group=sip&resolution=1m&from=2026-01-01T02:10:00Z&to=2026-01-01T03:00:00Z", "kept"}, // bins finer than a block
	} {
		params := c.params
		code, h, body := get(t, ts, "/api/v1/topseries?"+params)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", params, code, body)
		}
		if m := regexp.MustCompile(`series;desc=(\w+);`).FindStringSubmatch(h.Get("Server-Timing")); m == nil || m[1] != c.series {
			t.Errorf("%s: Server-Timing %q, want the series %s", params, h.Get("Server-Timing"), c.series)
		}
		_, _, plain := get(t, tsPlain, "/api/v1/topseries?"+params)
		if !bytes.Equal(maskElapsed(body), maskElapsed(plain)) {
			t.Errorf("%s: with bin totals\n%s\nwithout\n%s", params, body, plain)
		}
		var doc struct{ Top, Series, Totals json.RawMessage }
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		v, _ := url.ParseQuery(params)
		res := v.Get("resolution")
		v.Del("resolution")
		query1 := func(v url.Values) []byte {
			code, _, b := get(t, ts, "/api/v1/query?"+v.Encode())
			if code != http.StatusOK {
				t.Fatalf("%s: %d %s", v.Encode(), code, b)
			}
			return b
		}
		same := func(part string, got json.RawMessage, want []byte) {
			var a, b bytes.Buffer
			if err := json.Compact(&a, got); err != nil {
				t.Fatal(err)
			}
			if err := json.Compact(&b, want); err != nil {
				t.Fatal(err)
			}
			if ga, wb := compactElapsed.ReplaceAll(a.Bytes(), nil), compactElapsed.ReplaceAll(b.Bytes(), nil); !bytes.Equal(ga, wb) {
				t.Errorf("%s: %s\n%s\n/api/v1/query answers\n%s", params, part, ga, wb)
			}
		}
		same("top", doc.Top, query1(v))
		tv := url.Values{}
		for k, x := range v {
			tv[k] = x
		}
		tv.Set("group", "time")
		tv.Set("resolution", res)
		tv.Set("limit", "0")
		tv.Del("ascending")
		same("totals", doc.Totals, query1(tv))

		var top, series, totals struct {
			Query  struct{ Condition string }
			Rows   []map[string]any
			Totals map[string]uint64
		}
		for _, p := range []struct {
			raw json.RawMessage
			dst any
		}{{doc.Top, &top}, {doc.Series, &series}, {doc.Totals, &totals}} {
			if err := json.Unmarshal(p.raw, p.dst); err != nil {
				t.Fatal(err)
			}
		}
		if len(top.Rows) == 0 {
			if string(doc.Series) != "null" || top.Totals["flows"] != 0 {
				t.Errorf("%s: no top rows, series %s", params, doc.Series)
			}
			continue
		}
		sv := url.Values{}
		for k, x := range v {
			sv[k] = x
		}
		sv.Set("resolution", res)
		sv.Set("limit", "0")
		sv.Set("condition", series.Query.Condition)
		same("series", doc.Series, query1(sv))
		// The series add up to the top rows, the bins to the totals.
		key := func(r map[string]any) string {
			delete(r, "time")
			k, _ := json.Marshal(map[string]any{"sip": r["sip"], "dip": r["dip"], "sport": r["sport"], "dport": r["dport"], "proto": r["proto"], "iface": r["iface"], "node": r["node"]})
			return string(k)
		}
		sums := map[string]float64{}
		for _, r := range series.Rows {
			sums[key(r)] += r["bytes_out"].(float64) + r["packets_in"].(float64)
		}
		for _, r := range top.Rows {
			if k := key(r); sums[k] != r["bytes_out"].(float64)+r["packets_in"].(float64) {
				t.Errorf("%s: the series of %s add up to %v, the top row says %v", params, k, sums[k], r["bytes_out"].(float64)+r["packets_in"].(float64))
			}
		}
		var flows uint64
		for _, r := range totals.Rows {
			flows += uint64(r["flows"].(float64))
		}
		if flows != top.Totals["flows"] || flows == 0 {
			t.Errorf("%s: the bins hold %d flows, the top's totals %d", params, flows, top.Totals["flows"])
		}
	}
}

// TestTopSeriesErrors: a missing or bad resolution, grouping by time, and
// /api/v1/query's own mistakes are 400s naming the parameter.
func TestTopSeriesErrors(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	for _, c := range []struct{ params, param string }{
		{"group=sip", "resolution"},
		{"group=sip&resolution=soon", "resolution"},
		{"group=sip&resolution=10ms", "resolution"},
		{"group=sip&resolution=1h&resolution=2h", "resolution"},
		{"group=sip,time&resolution=1h", "group"},
		{"group=nope&resolution=1h", "group"},
		{"group=sip&resolution=1h&condition=dport+%3D", "condition"},
		{"group=sip&resolution=1h&x=1", "x"},
	} {
		code, _, body := get(t, ts, "/api/v1/topseries?"+c.params)
		if e := apiError(t, body); code != http.StatusBadRequest || e.Param != c.param {
			t.Errorf("%s: %d %s, want 400 naming %s", c.params, code, body, c.param)
		}
	}
}
