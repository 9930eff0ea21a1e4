package pcap

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/weir-dev/weir/internal/source"
)

// Stdin is the path that names standard input in OpenFiles.
const Stdin = "-"

// StdinName is the interface name of frames read from standard input that
// carry none of their own (classic pcap, unnamed pcapng interfaces).
const StdinName = "stdin"

// ErrStdinTwice is returned by OpenFiles when "-" is given more than once.
var ErrStdinTwice = errors.New("pcap: standard input (-) can be read only once")

// Files reads captures one after the other as one stream of frames, the
// way rotated captures (tcpdump -C, -G, -W) are one capture: a single flow
// table sees them all, so timeouts run across file boundaries and a flow
// spanning two files is one flow. Each file keeps its own format,
// compression and pcapng interfaces; frames without an interface name get
// the first input's base name (or StdinName), so one capture cut in pieces
// stays one interface. Every error names the file it happened in.
//
// Files is a source.PacketSource. It is not safe for concurrent use, except
// Stop.
type Files struct {
	paths []string
	name  string
	stdin io.Reader
	cur   *Reader
	idx   int // paths[idx] is cur's
	done  Stats
	stop  stopper

	lastTime   int64 // the previous file's last frame time
	started    bool  // cur has returned a frame
	outOfOrder []string
}

// maxOutOfOrder bounds the out-of-order file names kept for the warning.
const maxOutOfOrder = 8

// OpenFiles checks that every path can be opened (so a typo in the tenth
// name fails at once, not an hour later) and opens the first. "-" is stdin,
// read once.
func OpenFiles(paths []string, stdin io.Reader) (*Files, error) {
	if len(paths) == 0 {
		return nil, errors.New("pcap: no capture to read")
	}
	seen := false
	for _, p := range paths {
		if p == Stdin {
			if seen {
				return nil, ErrStdinTwice
			}
			seen = true
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		f.Close()
		if err == nil && st.IsDir() {
			return nil, fmt.Errorf("%s: is a directory, not a capture", p)
		}
	}
	m := &Files{paths: paths, stdin: stdin, name: StdinName}
	if paths[0] != Stdin {
		m.name = BaseName(paths[0])
	}
	if err := m.open(0); err != nil {
		return nil, err
	}
	return m, nil
}

// label names an input in errors.
func (m *Files) label(i int) string {
	if m.paths[i] == Stdin {
		return "standard input"
	}
	return m.paths[i]
}

// open opens input i as the current reader.
func (m *Files) open(i int) error {
	var r *Reader
	var err error
	if m.paths[i] == Stdin {
		in, restore := m.stop.watch(m.stdin)
		if r, err = NewReader(in); err != nil {
			_ = restore() // the reader's error is the one to report
			return fmt.Errorf("%s: %w", m.label(i), err)
		}
		r.closer = closerFunc(restore)
	} else {
		f, err := os.Open(m.paths[i])
		if err != nil {
			return err
		}
		in, restore := m.stop.watch(f)
		if r, err = NewReader(in); err != nil {
			_ = restore() // the reader's error is the one to report
			f.Close()
			return fmt.Errorf("%s: %w", m.label(i), err)
		}
		r.closer = closerFunc(func() error { return errors.Join(restore(), f.Close()) })
	}
	r.DefaultIface = m.name
	m.cur, m.idx, m.started = r, i, false
	return nil
}

type closerFunc func() error

func (c closerFunc) Close() error { return c() }

// Next fills f with the next frame of the current input, moving on to the
// next input at the end of one. It returns io.EOF after the last, and
// source.ErrStopped after Stop.
func (m *Files) Next(f *source.Frame) error {
	for m.cur != nil {
		err := m.cur.Next(f)
		if err == nil {
			if !m.started {
				m.started = true
				if m.idx > 0 && f.Time < m.lastTime && len(m.outOfOrder) < maxOutOfOrder {
					m.outOfOrder = append(m.outOfOrder, m.label(m.idx))
				}
			}
			m.lastTime = f.Time
			return nil
		}
		if m.stop.stopped() {
			return source.ErrStopped
		}
		if !errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: %w", m.label(m.idx), err)
		}
		m.finish()
		if m.idx+1 == len(m.paths) {
			m.cur = nil
			break
		}
		if err := m.open(m.idx + 1); err != nil {
			m.cur = nil
			return err
		}
	}
	if m.stop.stopped() {
		return source.ErrStopped
	}
	return io.EOF
}

// finish closes the current reader and adds its counters to the total.
func (m *Files) finish() {
	s := m.cur.Stats()
	m.cur.Close()
	m.done.add(&s)
	m.done.Files++
}

// Stop makes a Next blocked on standard input or a pipe return
// source.ErrStopped (files never block). Safe to call from another
// goroutine, more than once.
func (m *Files) Stop() { m.stop.stop() }

// Close closes the current input. Next then returns source.ErrStopped.
func (m *Files) Close() error {
	m.stop.stop()
	if m.cur == nil {
		return nil
	}
	err := m.cur.Close()
	m.cur = nil
	return err
}

// Stats returns the counters of every input read so far, summed; Format
// and Compression are the current (or last) input's.
func (m *Files) Stats() Stats {
	s := m.done
	if m.cur != nil {
		c := m.cur.Stats()
		s.add(&c)
		s.Files++
		s.Format, s.Compression = c.Format, c.Compression
	}
	return s
}

// OutOfOrder names the inputs (at most 8) whose first frame is older than
// the previous input's last: given out of time order, their flows may be
// split or cut short by the timeouts.
func (m *Files) OutOfOrder() []string { return m.outOfOrder }

// add sums o's counters into s.
func (s *Stats) add(o *Stats) {
	s.Format, s.Compression = o.Format, o.Compression
	s.Packets += o.Packets
	s.Bytes += o.Bytes
	s.CapturedBytes += o.CapturedBytes
	s.WireBytes += o.WireBytes
	s.Sections += o.Sections
	s.Interfaces += o.Interfaces
	s.SkippedOther += o.SkippedOther
	for k, v := range o.Skipped {
		if s.Skipped == nil {
			s.Skipped = make(map[uint32]uint64)
		}
		if _, ok := s.Skipped[k]; !ok && len(s.Skipped) >= maxSkipTypes {
			s.SkippedOther += v
			continue
		}
		s.Skipped[k] += v
	}
}
