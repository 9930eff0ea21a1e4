package api

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/query"
)

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }

// queryParams are the parameters /api/v1/query takes; they mean what the
// flags of 'weir query' of the same names mean.
var queryParams = []string{"group", "condition", "from", "to", "resolution", "sort", "limit", "ascending", "iface", "live"}

// parseQuery turns /api/v1/query's parameters into a query, exactly as
// 'weir query' turns its flags: the same defaults (top 10 by bytes, every
// interface, all stored time), the same parsers, the same checks.
func parseQuery(v url.Values, now time.Time) (q *query.Query, live bool, e *Error) {
	for k := range v {
		if !slices.Contains(queryParams, k) {
			return nil, false, badParam(k, "unknown parameter %q; /api/v1/query takes %s", k, strings.Join(queryParams, ", "))
		}
	}
	for _, k := range queryParams {
		if len(v[k]) > 1 && k != "iface" {
			return nil, false, badParam(k, "%s given %d times; give it once", k, len(v[k]))
		}
	}
	q = &query.Query{Limit: 10}
	group := v.Get("group")
	if group == "" {
		return nil, false, badParam("group", "give the attributes to group by, e.g. group=sip or group=talk_conv (GET /api/v1/meta lists them)")
	}
	var err error
	if q.Group, err = query.ParseGroupBy(group); err != nil {
		return nil, false, syntaxError("group", CodeBadGroup, err)
	}
	if s := v.Get("resolution"); s != "" {
		if q.Resolution, err = query.ParseDuration(s); err != nil {
			return nil, false, badParam("resolution", "resolution %q is not a duration (5m, 1h, 1d)", s)
		}
		if q.Resolution < time.Second {
			return nil, false, badParam("resolution", "resolution must be at least 1s")
		}
		q.Group, _ = query.ParseGroupBy(group + ",time") // group parsed above
	}
	if q.Cond, err = query.ParseCondition(v.Get("condition")); err != nil {
		return nil, false, syntaxError("condition", CodeBadCondition, err)
	}
	sort := v.Get("sort")
	if sort == "" {
		sort = "bytes"
	}
	if q.Sort, q.Dir, err = query.ParseSort(sort); err != nil {
		return nil, false, badParam("sort", "%v", err)
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return nil, false, badParam("limit", "limit %q: want a number of groups, 0 or more (0: all)", s)
		}
		q.Limit = n
	}
	if q.Ascending, e = parseBool(v, "ascending"); e != nil {
		return nil, false, e
	}
	if live, e = parseBool(v, "live"); e != nil {
		return nil, false, e
	}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"from", &q.From}, {"to", &q.To}} {
		if s := v.Get(t.name); s != "" {
			if *t.dst, err = query.ParseTime(s, now); err != nil {
				return nil, false, badParam(t.name, "%s: %v", t.name, err)
			}
		}
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return nil, false, badParam("from", "from (%s) must be before to (%s)", q.From.Format(time.RFC3339), q.To.Format(time.RFC3339))
	}
	for _, s := range v["iface"] {
		q.Ifaces = append(q.Ifaces, strings.Split(s, ",")...)
	}
	return q, live, nil
}

// parseBool reads a boolean parameter: absent is false, present without
// a value ("?live") true.
func parseBool(v url.Values, name string) (bool, *Error) {
	vals, ok := v[name]
	if !ok {
		return false, nil
	}
	s := vals[0]
	if s == "" {
		return true, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, badParam(name, "%s %q: want true or false", name, s)
	}
	return b, nil
}
