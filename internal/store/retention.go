package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// PruneStats counts what one Prune removed.
type PruneStats struct {
	Partitions int   // day partitions deleted
	Blocks     int   // committed blocks in them
	Rows       int64 // rows in them
	Bytes      int64 // bytes freed
}

// Prune deletes, oldest first, the day partitions older than
// Config.Retention relative to now, then more until the store fits in
// Config.MaxSize. A deleted partition is first renamed to a dot-name (which
// readers ignore) so it vanishes atomically.
func (s *Store) Prune(now time.Time) (PruneStats, error) {
	if s.readOnly {
		return PruneStats{}, ErrReadOnly
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return PruneStats{}, ErrClosed
	}
	return s.pruneLocked(now)
}

type dayPart struct {
	dir   string
	idir  string
	day   int64
	size  int64
	iface string
}

// listParts lists every day partition with its size.
func (s *Store) listParts() ([]dayPart, error) {
	idirs, err := s.ifaceDirs(nil)
	if err != nil {
		return nil, err
	}
	var out []dayPart
	for _, idir := range idirs {
		days, err := os.ReadDir(idir)
		if err != nil {
			continue
		}
		for _, de := range days {
			day, ok := parseDay(de.Name())
			if !ok {
				continue
			}
			p := dayPart{dir: filepath.Join(idir, de.Name()), idir: idir, day: day}
			files, _ := os.ReadDir(p.dir)
			for _, f := range files {
				if info, err := f.Info(); err == nil {
					p.size += info.Size()
				}
			}
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].day != out[j].day {
			return out[i].day < out[j].day
		}
		return out[i].dir < out[j].dir
	})
	return out, nil
}

// diskUsage sums the partitions' sizes.
func (s *Store) diskUsage() int64 {
	parts, _ := s.listParts()
	var n int64
	for _, p := range parts {
		n += p.size
	}
	return n
}

func (s *Store) pruneLocked(now time.Time) (PruneStats, error) {
	var st PruneStats
	parts, err := s.listParts()
	if err != nil {
		return st, err
	}
	var total int64
	for _, p := range parts {
		total += p.size
	}
	cutoff := dayOf(now.Add(-s.cfg.Retention).UnixNano()) // days before this are wholly older
	var errs []error
	for _, p := range parts {
		old := s.cfg.Retention > 0 && p.day < cutoff
		big := s.cfg.MaxSize > 0 && total > s.cfg.MaxSize
		if !old && !big {
			break // sorted oldest first: nothing later qualifies either
		}
		blocks, rows := 0, int64(0)
		if x, err := readIndex(p.dir); x != nil && (err == nil || errors.Is(err, errBadIndex)) {
			blocks = len(x.entries)
			for _, e := range x.entries {
				rows += int64(e.rows)
			}
		}
		if err := s.removePart(p); err != nil {
			errs = append(errs, err)
			continue
		}
		total -= p.size
		st.Partitions++
		st.Blocks += blocks
		st.Rows += rows
		st.Bytes += p.size
	}
	s.prunedParts.Add(int64(st.Partitions))
	s.prunedBlocks.Add(int64(st.Blocks))
	s.prunedBytes.Add(st.Bytes)
	s.bytesOnDisk.Store(total)
	return st, errors.Join(errs...)
}

// removePart closes the writer's handle on p, renames p out of sight and
// deletes it.
func (s *Store) removePart(p dayPart) error {
	for _, wp := range s.parts {
		if wp.dir == p.dir {
			wp.close() // pending rows stay; a later writeout recreates the partition
		}
	}
	tomb := filepath.Join(p.idir, fmt.Sprintf(".del-%s-%x", filepath.Base(p.dir), newEpoch()))
	if err := os.Rename(p.dir, tomb); err != nil {
		return fmt.Errorf("store: prune %s: %w", p.dir, err)
	}
	if !s.cfg.NoSync {
		_ = syncDir(p.idir)
	}
	if err := os.RemoveAll(tomb); err != nil {
		return fmt.Errorf("store: prune %s: %w", p.dir, err)
	}
	return nil
}

// removeTombstones finishes deletions a crash interrupted.
func (s *Store) removeTombstones() {
	idirs, _ := s.ifaceDirs(nil)
	for _, idir := range idirs {
		ents, _ := os.ReadDir(idir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".del-") {
				_ = os.RemoveAll(filepath.Join(idir, e.Name()))
			}
		}
	}
}
