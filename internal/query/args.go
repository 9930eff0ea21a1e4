package query

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Args are a question as 'weir query' takes it: text still to be parsed.
// Build checks and parses it; its errors name the flags of 'weir query'.
type Args struct {
	Group      string   // GROUP-BY: "sip", "talk_conv", "dport,proto"
	Condition  []string // the condition, in words (joined with spaces)
	From, To   string   // ParseTime forms; "" unbounded
	Sort       string   // ParseSort form; "" is bytes
	Ifaces     []string // each may be a comma-separated list
	Limit      int
	Workers    int
	Resolution time.Duration
	Ascending  bool
}

// ArgError is a mistake in one part of Args: Part is the flag or the
// argument ("--from", "group-by", "condition"), Err what is wrong (a
// *SyntaxError for the group-by and the condition, with a caret to show).
type ArgError struct {
	Part string
	Err  error
}

func (e *ArgError) Error() string { return e.Part + ": " + e.Err.Error() }

func (e *ArgError) Unwrap() error { return e.Err }

// Build parses a into a Query; relative times are taken from now.
func (a Args) Build(now time.Time) (*Query, error) {
	if a.Group == "" {
		return nil, errors.New("give the attributes to group by, e.g. 'weir query sip' or 'weir query talk_conv' (see --help)")
	}
	q := &Query{Limit: a.Limit, Ascending: a.Ascending, Resolution: a.Resolution, Workers: a.Workers}
	var err error
	if q.Group, err = ParseGroupBy(a.Group); err != nil {
		return nil, &ArgError{"group-by", err}
	}
	if a.Resolution != 0 {
		if a.Resolution < time.Second {
			return nil, errors.New("--resolution must be at least 1s")
		}
		q.Group, _ = ParseGroupBy(a.Group + ",time")
	}
	if q.Cond, err = ParseCondition(strings.Join(a.Condition, " ")); err != nil {
		return nil, &ArgError{"condition", err}
	}
	sort := a.Sort
	if sort == "" {
		sort = "bytes"
	}
	if q.Sort, q.Dir, err = ParseSort(sort); err != nil {
		return nil, &ArgError{"--sort", err}
	}
	if a.Limit < 0 {
		return nil, errors.New("--limit must not be negative")
	}
	for _, t := range []struct {
		arg, name string
		dst       *time.Time
	}{{a.From, "--from", &q.From}, {a.To, "--to", &q.To}} {
		if t.arg == "" {
			continue
		}
		if *t.dst, err = ParseTime(t.arg, now); err != nil {
			return nil, &ArgError{t.name, err}
		}
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return nil, fmt.Errorf("--from (%s) must be before --to (%s)", q.From.Format(time.RFC3339), q.To.Format(time.RFC3339))
	}
	for _, s := range a.Ifaces {
		q.Ifaces = append(q.Ifaces, strings.Split(s, ",")...)
	}
	return q, nil
}
