package query

import (
	"context"
	"strings"
	"testing"
	"time"
)

// BenchmarkConsoleQueries times, one at a time, the queries the web
// console's first paint waits for on one day of gendb data (web/src/main.ts:
// the day in 10-minute bins): the totals per bin, the top 10 sources, the
// top 10 with the totals per bin in one pass (/api/v1/topseries), the top
// 10's series (their sources as a condition) and the Sankey's top 20
// pairs of the top 10. cpu-ns/row is the process's CPU time per stored row.
func BenchmarkConsoleQueries(b *testing.B) {
	s, rows := genStore(b)
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(24 * time.Hour)
	top, err := Run(context.Background(), s, &Query{Group: []Attr{AttrSrcIP}, From: from, To: to, Limit: 10}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var ors []string
	for _, r := range top.Rows {
		ors = append(ors, "(sip = "+r.SrcIP.String()+")")
	}
	topCond := strings.Join(ors, " or ")
	for _, c := range []struct {
		name, group, cond string
		res, bins         time.Duration
		limit             int
	}{
		{"totals", "time", "", 10 * time.Minute, 0, 0},
		{"top", "sip", "", 0, 0, 10},
		{"top+bins", "sip", "", 0, 10 * time.Minute, 10}, // /api/v1/topseries: the top and the totals per bin in one pass
		{"series", "sip,time", topCond, 10 * time.Minute, 0, 0},
		{"sankey", "sip,dip", topCond, 0, 0, 20},
	} {
		b.Run(c.name, func(b *testing.B) {
			g, err := ParseGroupBy(c.group)
			if err != nil {
				b.Fatal(err)
			}
			cond, err := ParseCondition(c.cond)
			if err != nil {
				b.Fatal(err)
			}
			timeQuery(b, s, &Query{Group: g, Cond: cond, From: from, To: to, Resolution: c.res, BinTotals: c.bins, Limit: c.limit}, rows)
		})
	}
}
