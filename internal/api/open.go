package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/weir-dev/weir/internal/clickhouse"
	"github.com/weir-dev/weir/internal/query"
	"github.com/weir-dev/weir/internal/store"
)

// SourceConfig says where 'weir query' and 'weir serve' get their
// answers: a flow store, or ClickHouse when ClickHouse is set.
type SourceConfig struct {
	Dir  string   // the flow store, opened read-only
	Live LiveFunc // a running capture's live flows (nil: none)

	ClickHouse         string // its HTTP interface, http(s)://host:port
	Database           string // created by 'weir clickhouse setup'
	User, PasswordFile string
}

// Source is an open Backend and what its answers left out.
type Source struct {
	Backend
	st      *store.Store // nil for ClickHouse
	corrupt int          // damaged blocks the last answer skipped
}

// OpenSource opens the store read-only, or connects to ClickHouse and
// asks for its version.
func OpenSource(ctx context.Context, cfg SourceConfig) (*Source, error) {
	if cfg.ClickHouse != "" {
		conn, err := clickhouse.NewHTTP(cfg.ClickHouse, cfg.User, cfg.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("--clickhouse: %w", err)
		}
		b, err := NewClickHouseBackend(ctx, conn, cfg.Database)
		if err != nil {
			return nil, fmt.Errorf("--clickhouse %s: %w", cfg.ClickHouse, err)
		}
		return &Source{Backend: b}, nil
	}
	st, err := store.OpenReadOnly(cfg.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no flow store at %s: run 'weir capture' first, or point --data-dir at one", cfg.Dir)
	} else if err != nil {
		return nil, err
	}
	return &Source{Backend: NewStoreBackend(st, cfg.Live), st: st}, nil
}

// Close closes the store.
func (s *Source) Close() {
	if s.st != nil {
		s.st.Close()
	}
}

// Answer runs q (with the live flows of a running capture) and writes the
// result in f. answered, when not nil, is called once the query is done,
// before the result is written (where a progress bar ends).
func (s *Source) Answer(ctx context.Context, q *query.Query, live bool, w io.Writer, f query.Format, answered func()) error {
	res, err := s.Query(ctx, q, live)
	if answered != nil {
		answered()
	}
	if live && err != nil {
		return fmt.Errorf("--live: %w", err)
	} else if err != nil {
		return err
	}
	s.corrupt = res.Stats.BlocksCorrupt
	return res.Write(w, f)
}

// List writes the stored interfaces (only those of only, each a name or
// a comma-separated list, when given).
func (s *Source) List(ctx context.Context, only []string, w io.Writer, f query.Format) error {
	h, err := s.Holdings(ctx)
	if err != nil {
		return err
	}
	want := strings.Split(strings.Join(only, ","), ",")
	spans := slices.DeleteFunc(h.Interfaces, func(sp IfaceSpan) bool { return len(only) > 0 && !slices.Contains(want, sp.Iface) })
	return WriteIfaces(w, spans, f)
}

// Warn says on w, each line after prefix, what damaged blocks the answer
// or the list left out.
func (s *Source) Warn(w io.Writer, prefix string, list bool) {
	if s.st == nil {
		return
	}
	ss := s.st.Stats()
	if s.corrupt == 0 && ss.CorruptBlocks == 0 && ss.CorruptIndexes == 0 {
		return
	}
	if list {
		fmt.Fprintf(w, "%s%d damaged blocks are left out of the list ('weir store check' lists them)\n", prefix, ss.CorruptBlocks)
	} else {
		fmt.Fprintf(w, "%s%d damaged blocks were skipped; the answer leaves out their records ('weir store check' lists them)\n", prefix, max(s.corrupt, int(ss.CorruptBlocks)))
	}
	for _, m := range ss.Warnings {
		fmt.Fprintf(w, "%s%s\n", prefix, m)
	}
}
