package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/query"
)

// handleTopSeries answers GET /api/v1/topseries: what the console's first
// paint waits for, in one request. "top" is /api/v1/query's answer for
// the parameters without resolution (the top N groups over the range),
// "totals" its answer grouped by time alone at resolution without a
// limit (the flows per bin, for "other"), and "series" its answer grouped
// by the groups and time at resolution, without a limit, under the
// condition that the row is one of the top N ("(condition) and ((sip = a)
// or …)", as the console's drill-down writes it; null when the top is
// empty). On the embedded store the top, the totals and (for the
// shapes query.TopSeries allows) the series come from one read of the
// blocks (query.Query.BinTotals, query.RunTopSeries); otherwise the
// series is a second.
// The queries run one after another in one query slot.
func (s *Server) handleTopSeries(rw http.ResponseWriter, req *http.Request) *Error {
	v := req.URL.Query()
	rs := v.Get("resolution")
	if rs == "" {
		return badParam("resolution", "give the series' time bin width, e.g. resolution=10m")
	}
	if len(v["resolution"]) > 1 {
		return badParam("resolution", "resolution given %d times; give it once", len(v["resolution"]))
	}
	step, err := query.ParseDuration(rs)
	if err != nil {
		return badParam("resolution", "resolution %q is not a duration (5m, 1h, 1d)", rs)
	}
	if step < time.Second {
		return badParam("resolution", "resolution must be at least 1s")
	}
	topV := url.Values{}
	for k, vs := range v {
		if k != "resolution" {
			topV[k] = vs
		}
	}
	top, live, e := parseQuery(topV, s.cfg.Now())
	if e != nil {
		return e
	}
	if slices.Contains(top.Group, query.AttrTime) {
		return badParam("group", "group by attributes other than time: the series are binned by resolution")
	}
	top.Workers = s.cfg.QueryWorkers
	top.BinTotals = step
	// The series and the totals group as /api/v1/query does with a resolution (time is added to the attributes).
	seriesGroup, _ := query.ParseGroupBy(v.Get("group") + ",time") // the group was parsed above
	totalsGroup, _ := query.ParseGroupBy("time")
	byTime := func(group []query.Attr, cond *query.Condition) *query.Query {
		return &query.Query{Group: group, Cond: cond, From: top.From, To: top.To, Ifaces: top.Ifaces,
			Resolution: step, Sort: top.Sort, Dir: top.Dir, Ascending: top.Ascending, Workers: top.Workers}
	}
	ctx, cancel := context.WithTimeout(req.Context(), s.cfg.QueryTimeout)
	defer cancel()
	queued := time.Now()
	release, e := s.acquire(ctx)
	if e != nil {
		return e
	}
	defer release()
	start := time.Now()
	check := func(res *query.Result) *Error {
		if len(res.Rows) > s.cfg.MaxRows {
			s.stats.reject("too_large")
			return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Param: "limit",
				Message: "the answer has " + strconv.Itoa(len(res.Rows)) + " rows, more than this server returns (" + strconv.Itoa(s.cfg.MaxRows) +
					"): give a smaller limit, a coarser resolution, a narrower time range or a condition"}
		}
		return nil
	}
	run := func(q *query.Query) (*query.Result, *Error) {
		t := time.Now()
		res, err := s.cfg.Backend.Query(ctx, q, live)
		s.stats.queryTime(time.Since(t))
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		return res, check(res)
	}
	var topRes *query.Result
	var kept *query.TopSeries // the top's sums per bin, when the backend keeps them: no second read for the series
	if b, ok := s.cfg.Backend.(topSeriesBackend); ok {
		t := time.Now()
		res, ts, err := b.TopSeries(ctx, top, live)
		s.stats.queryTime(time.Since(t))
		if err != nil {
			return s.fail(ctx, err)
		}
		if e := check(res); e != nil {
			return e
		}
		topRes, kept = res, ts
		defer ts.Release()
	} else if topRes, e = run(top); e != nil {
		return e
	}
	totalsQ := byTime(totalsGroup, top.Cond)
	totals := &query.Result{Query: totalsQ, Rows: topRes.BinTotals, Totals: topRes.Totals, Stats: topRes.Stats}
	totals.Stats.Groups = len(topRes.BinTotals)
	if topRes.BinTotals == nil { // a backend without bin totals (ClickHouse): its own query
		if totals, e = run(totalsQ); e != nil {
			return e
		}
	}
	var topJSON, totalsJSON bytes.Buffer
	if err := topRes.Write(&topJSON, query.JSON); err != nil {
		return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
	}
	if err := totals.Write(&totalsJSON, query.JSON); err != nil {
		return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
	}
	queried := time.Now()
	seriesJSON := []byte("null")
	how := "series;desc=none" // Server-Timing: the series summed from the top's pass (kept), read again (read), or none
	if len(topRes.Rows) > 0 {
		text, err := topCondition(top, topJSON.Bytes())
		if err != nil {
			return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
		}
		cond, err := query.ParseCondition(text)
		if err != nil {
			return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "the top's condition: " + err.Error()}
		}
		sq := byTime(seriesGroup, cond)
		series, ok := kept.Series(sq, topRes)
		if ok {
			how = "series;desc=kept"
			e = check(series)
		} else {
			how = "series;desc=read"
			series, e = run(sq)
		}
		if e != nil {
			return e
		}
		var b bytes.Buffer
		if err := series.Write(&b, query.JSON); err != nil {
			return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
		}
		seriesJSON = b.Bytes()
	}
	ran := time.Now()
	// The parts as /api/v1/query writes them, side by side: not indented again (~0.4 MB for a day's series, on the
	// first paint's path).
	body := slices.Concat([]byte(`{"top": `), topJSON.Bytes(), []byte(`, "series": `), seriesJSON, []byte(`, "totals": `), totalsJSON.Bytes(), []byte("}\n"))
	serverTiming(rw, timing{"queue", start.Sub(queued)}, timing{"top", queried.Sub(start)}, timing{how, ran.Sub(queried)},
		timing{"encode", time.Since(ran)})
	send(rw, req, "application/json", body)
	return nil
}

// topSeriesBackend is a Backend that answers a top N with what its
// series need kept (StoreBackend; query.TopSeries.Series says when it
// cannot, and the series are then queried).
type topSeriesBackend interface {
	TopSeries(ctx context.Context, q *query.Query, live bool) (*query.Result, *query.TopSeries, error)
}

// topCondition is the condition that keeps the rows of the top's groups:
// its rows' values (from its JSON, as a client reads them) compared as the
// console's drill-down does, "(a = x and b = y) or …", within q's own
// condition.
func topCondition(q *query.Query, topJSON []byte) (string, error) {
	var doc struct {
		Rows []map[string]json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(topJSON, &doc); err != nil {
		return "", err
	}
	ors := make([]string, 0, len(doc.Rows))
	for _, r := range doc.Rows {
		ands := make([]string, 0, len(q.Group))
		for _, a := range q.Group {
			name := a.String()
			var val string
			raw := r[name]
			var str string
			switch {
			case raw == nil || string(raw) == "null":
				val = `""` // a NAT attribute of a record not translated
			case json.Unmarshal(raw, &str) == nil:
				val = query.Quote(str)
			default:
				val = string(raw) // a number
			}
			ands = append(ands, name+" = "+val)
		}
		ors = append(ors, "("+strings.Join(ands, " and ")+")")
	}
	text := strings.Join(ors, " or ")
	if c := q.Cond.String(); c != "" {
		text = "(" + c + ") and (" + text + ")"
	}
	return text, nil
}
