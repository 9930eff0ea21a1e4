package store

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/weir-dev/weir/internal/format"
)

// WriteErrorReasons label weir_store_write_errors_total and key
// Stats.WriteErrors: no_space (ENOSPC), quota (EDQUOT), read_only
// (EROFS), io (EIO), timeout (Flush or Close gave up on a write that did
// not return), permission (EACCES, EPERM), symlink (a link where a store
// file goes), other.
var WriteErrorReasons = [numReasons]string{"no_space", "quota", "read_only", "io", "timeout", "permission", "symlink", "other"}

const (
	reasonNoSpace = iota
	reasonQuota
	reasonReadOnly
	reasonIO
	reasonTimeout
	reasonPermission
	reasonSymlink
	reasonOther
	numReasons
)

// diskWide reports whether a failure of this reason stops every
// partition (the file system is full, read-only or failing), so that
// others are not tried before the retry is due; the other reasons hold
// back only the partition they happened to.
func diskWide(r int) bool { return r <= reasonTimeout }

func reasonOf(err error) int {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return reasonNoSpace
	case errors.Is(err, syscall.EDQUOT):
		return reasonQuota
	case errors.Is(err, syscall.EROFS):
		return reasonReadOnly
	case errors.Is(err, syscall.EIO):
		return reasonIO
	case errors.Is(err, ErrTimeout):
		return reasonTimeout
	case errors.Is(err, ErrSymlink):
		return reasonSymlink
	case errors.Is(err, os.ErrPermission):
		return reasonPermission
	}
	return reasonOther
}

// failState is the disk-wide failure in progress, if any.
type failState struct {
	active   bool
	cause    int
	since    time.Time
	retryAt  time.Time
	backoff  time.Duration
	dropped0 int64 // Stats.DroppedRows when it began
	dropSaid bool
	lastErr  error
}

// Retry backoff after a failed writeout: doubling from minRetry to maxRetry.
const (
	minRetry = 500 * time.Millisecond
	maxRetry = 5 * time.Second
)

func nextBackoff(b time.Duration) time.Duration { return min(max(2*b, minRetry), maxRetry) }

func (f *failState) retryDue(now time.Time) bool { return f.active && !now.Before(f.retryAt) }

// canWrite reports whether a writeout of p may be tried now.
func (s *Store) canWrite(p *wpart, now time.Time) bool {
	return (!s.fail.active || !now.Before(s.fail.retryAt)) && !now.Before(p.retryAt)
}

// writeFailed counts a failed writeout and says its cause once; the rows
// stay buffered and are retried after a backoff.
func (s *Store) writeFailed(p *wpart, err error, now time.Time) {
	r := reasonOf(err)
	s.writeErrs[r].Add(1)
	s.fail.lastErr = err
	held := fmt.Sprintf("%s records held, retrying (past %s held, records are dropped and counted)",
		commas(s.pendingRows.Load()), commas(int64(s.cfg.MaxPendingRows)))
	if diskWide(r) {
		if !s.fail.active {
			s.fail = failState{active: true, cause: -1, since: now, dropped0: s.droppedRows.Load()}
		}
		s.fail.backoff = nextBackoff(s.fail.backoff)
		s.fail.retryAt = now.Add(s.fail.backoff)
		s.fail.lastErr = err
		if s.fail.cause != r {
			s.fail.cause = r
			s.warn(fmt.Sprintf("%s; %s", errText(err), held))
		}
		return
	}
	p.backoff = nextBackoff(p.backoff)
	p.retryAt = now.Add(p.backoff)
	if msg := errText(err); p.cause != msg {
		p.cause = msg
		s.warn(fmt.Sprintf("%s; %s", msg, held))
	}
}

// writeOK ends a failure in progress, saying how long it lasted and what
// was dropped meanwhile.
func (s *Store) writeOK(p *wpart, now time.Time) {
	if p.cause != "" {
		s.warn(fmt.Sprintf("writing %s again", safePath(p.dir)))
		p.cause, p.dropSaid = "", false
	}
	p.backoff, p.retryAt = 0, time.Time{}
	if s.fail.active {
		s.warn(fmt.Sprintf("writing again after %v of %s errors; %s records were dropped meanwhile",
			now.Sub(s.fail.since).Round(time.Millisecond), WriteErrorReasons[s.fail.cause], commas(s.droppedRows.Load()-s.fail.dropped0)))
		s.fail = failState{}
	}
}

// dropRows counts n records dropped for want of room while writes fail,
// and says so once per failure.
func (s *Store) dropRows(n int64, p *wpart) {
	s.droppedRows.Add(n)
	said, cause := &p.dropSaid, p.cause
	if s.fail.active {
		said, cause = &s.fail.dropSaid, errText(s.fail.lastErr)
	}
	if !*said {
		*said = true
		s.warn(fmt.Sprintf("dropping records while writes fail (%s): the buffer is full (%s records; %s in one partition); each one dropped is counted in weir_store_dropped_rows_total",
			cause, commas(int64(s.cfg.MaxPendingRows)), commas(MaxBlockRows)))
	}
}

// dropPending drops every buffered record, counted, saying msg.
func (s *Store) dropPending(msg string) {
	var n int64
	for _, p := range s.parts {
		n += int64(len(p.pend))
		p.pend = nil
	}
	s.pendingRows.Add(-n)
	s.droppedRows.Add(n)
	if n > 0 {
		s.warn(msg)
	}
}

// retry tries the buffered rows again once a failure's backoff is due.
func (s *Store) retry() {
	_ = s.flushLocked(time.Time{}, false)
}

// bounded runs fn (Flush's or Close's work, which takes s.mu itself) and
// returns within Config.CloseTimeout whatever happens: fn gets a deadline
// a quarter earlier to stop between writeouts, and a write stuck in the
// kernel (a file system that does not answer) is left behind. When
// closing, what is still buffered then is counted as lost.
func (s *Store) bounded(fn func(deadline time.Time) error, closing bool) error {
	timeout := s.cfg.CloseTimeout
	done := make(chan error, 1)
	go func() { done <- fn(time.Now().Add(timeout - timeout/4)) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
	}
	s.writeErrs[reasonTimeout].Add(1)
	n := s.pendingRows.Load()
	if !closing {
		s.warn(fmt.Sprintf("flush: a write did not return within %v (file system not responding); %s records still buffered", timeout, commas(n)))
		return fmt.Errorf("%w: flush waited %v; %s records not written yet", ErrTimeout, timeout, commas(n))
	}
	if s.abandoned.CompareAndSwap(false, true) {
		s.droppedRows.Add(n)
		s.warn(fmt.Sprintf("closing: a write did not return within %v (file system not responding); %s buffered records are counted as lost", timeout, commas(n)))
	}
	return fmt.Errorf("%w: close gave up after %v; %s records counted as lost", ErrTimeout, timeout, commas(n))
}

// errText is err for a message: the path and the system's reason, without
// the layers of wrapping.
func errText(err error) string {
	if err == nil {
		return "no error"
	}
	var pe *os.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return fmt.Sprintf("writing %s: %v", safePath(pe.Path), pe.Err)
	case errors.As(err, &le):
		return fmt.Sprintf("writing %s: %v", safePath(le.New), le.Err)
	}
	return strings.TrimPrefix(err.Error(), "store: ")
}

// commas formats n with thousands separators: 1,234,567 (format.Int).
func commas(n int64) string { return format.Int(n) }

// safePath quotes a path that holds bytes a terminal would act on (the
// names under the data directory are the store's escaped ones, but a
// directory someone else put there need not be).
func safePath(p string) string {
	if !utf8.ValidString(p) {
		return strconv.QuoteToASCII(p)
	}
	for _, r := range p {
		if !strconv.IsPrint(r) {
			return strconv.QuoteToASCII(p)
		}
	}
	return p
}
