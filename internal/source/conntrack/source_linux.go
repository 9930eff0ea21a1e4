//go:build linux

package conntrack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/sink"
)

// Source reads a network namespace's conntrack table into flow records:
// a full dump every poll interval, and in between the event stream, so a
// connection that opens and closes between two polls is still reported
// (its destroy event carries its final counters). One goroutine (Run)
// owns the dump socket, the event socket and the Store.
type Source struct {
	cfg    SourceConfig
	dump   *Socket
	ev     *Events
	store  *Store
	emit   func([]flow.Record) error // the sink's Write, set by Run
	where  string                    // the namespace, for people
	recs   []flow.Record
	now    time.Time // time of the current dump or event read
	again  bool      // events were lost: dump again at once
	netns  Netns     // the namespace read
	track  *tracking // is anything tracked there? (nil: cannot tell)
	dumped int       // entries in the current dump

	mu    sync.Mutex
	stats SourceStats // copy published after each step, for Stats
	own   SourceStats // counters Run updates
}

// New opens the sockets (in cfg.Netns if set), turns on conntrack
// accounting and timestamps where allowed, and returns a Source whose Run
// hands record batches to a sink.
func New(cfg SourceConfig) (*Source, error) {
	cfg = cfg.withDefaults()
	cfg.Store.Events = !cfg.NoEvents
	s := &Source{cfg: cfg, store: NewStore(cfg.Store), recs: make([]flow.Record, 0, cfg.Batch)}
	var err error
	if s.dump, err = Open(Config{Netns: cfg.Netns, BufSize: cfg.BufSize}); err != nil {
		return nil, err
	}
	if !cfg.NoEvents {
		if s.ev, err = OpenEvents(EventsConfig{Netns: cfg.Netns, RcvBuf: cfg.EventBuf}); err != nil {
			s.dump.Close()
			return nil, err
		}
	}
	// Opening the socket loaded nf_conntrack if it was not: the sysctls exist now.
	s.sysctl("nf_conntrack_acct", "packet and byte counters are 0")
	s.sysctl("nf_conntrack_timestamp", "start times are when weir first saw each connection")
	var err2 error
	s.netns, err2 = IdentifyNetns(cfg.Netns)
	if s.netns.Name == "" {
		s.netns.Name = cfg.NetnsName
	}
	s.where = s.netns.String()
	if err2 != nil {
		s.where = fmt.Sprintf("this namespace (%v)", err2)
	}
	if cfg.Family == 0 {
		s.track = openTracking(cfg.Netns) // its SNMP counters cover both families
	}
	return s, nil
}

// capacity is the connection store's bound.
func (s *Source) capacity() int { return s.store.cfg.MaxConns }

// Namespace returns the network namespace the source reads.
func (s *Source) Namespace() Netns { return s.netns }

// sysctl turns on /proc/sys/net/netfilter/name in the source's namespace
// and says so, or says what is lost when it cannot.
func (s *Source) sysctl(name, without string) {
	path := "/proc/sys/net/netfilter/" + name
	var was string
	set := func() error {
		// /proc/sys/net resolves to the namespace of the opening thread.
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if was = strings.TrimSpace(string(b)); was == "1" {
			return nil
		}
		return os.WriteFile(path, []byte("1\n"), 0)
	}
	var err error
	if s.cfg.Netns != nil {
		err = s.cfg.Netns(set)
	} else {
		err = set()
	}
	switch {
	case err != nil:
		s.cfg.Logf("cannot turn on %s (%v): %s", name, err, without)
	case was != "1":
		s.cfg.Logf("turned on %s (connections opened before now are not covered)", name)
	}
}

// Close closes the sockets. Call it after Run returned.
func (s *Source) Close() error {
	s.track.close()
	err := s.dump.Close()
	if s.ev != nil {
		err = errors.Join(err, s.ev.Close())
	}
	return err
}

// Stats returns the counters as of the last poll or event read; safe to
// call from any goroutine.
func (s *Source) Stats() SourceStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func (s *Source) publish() {
	st := s.own
	st.Dump, st.Store, st.Rejected = s.dump.Stats(), s.store.Stats(), s.dump.Errors()
	if s.ev != nil {
		st.Events = s.ev.Stats()
		for i, n := range s.ev.Errors() {
			st.Rejected[i] += n
		}
	}
	s.mu.Lock()
	s.stats = st
	s.mu.Unlock()
}

// Run polls and reads events until ctx is done, writing records to out,
// then reads the table a last time and writes a last record for every
// connection with unexported counts (reason shutdown, or end for ended
// ones). It returns nil after ctx ends, or the error that stopped it.
func (s *Source) Run(ctx context.Context, out sink.Sink) error {
	s.emit = out.Write
	defer s.publish()
	ev := "with events"
	if s.cfg.NoEvents {
		ev = "without events"
	}
	s.cfg.Logf("reading the conntrack table of %s every %s %s (up to %s connections)", s.where, s.cfg.PollInterval, ev, format.Count(uint64(s.store.cfg.MaxConns)))
	next := time.Now()
	for ctx.Err() == nil {
		wait := min(time.Until(next), 100*time.Millisecond) // wake up to see ctx end
		if s.ev != nil {
			ready, err := s.ev.Wait(max(wait, 0))
			if err != nil {
				return err
			}
			if ready {
				if err := s.readEvents(); err != nil {
					return err
				}
			}
		} else if wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		if s.again {
			s.again, next = false, time.Now() // lost events: a dump catches up
		}
		if time.Now().Before(next) {
			s.publish()
			continue
		}
		if err := s.Poll(); err != nil {
			s.cfg.Logf("%v", err)
		}
		if !s.again {
			next = time.Now().Add(s.cfg.PollInterval)
		}
	}
	// A last look, so that the shutdown records hold the counts up to
	// now: the events queued, then a dump (counters move without events).
	s.now = time.Now()
	if s.ev != nil {
		_, _ = s.ev.Read(s.update) // an overrun here is covered by the dump
	}
	if err := s.dump.Dump(s.cfg.Family, func(c *Conn) error { s.store.Update(c, s.now); return nil }); err == nil {
		s.own.Polls++
	}
	s.store.Flush(time.Now(), s.collect)
	return s.flush()
}

// update feeds one dumped or event entry to the store.
func (s *Source) update(c *Conn) { s.store.Update(c, s.now) }

// dumpOne feeds one dumped entry to the store.
func (s *Source) dumpOne(c *Conn) error {
	s.dumped++
	s.store.Update(c, s.now)
	return nil
}

// checkTracking says, once, when the table stays empty while traffic
// crosses the namespace: conntrack has no hook there.
func (s *Source) checkTracking() {
	untracked, pkts, est := s.track.check(s.dumped, s.store.Stats().New)
	if untracked && !s.own.Untracked {
		s.cfg.Logf("%s", UntrackedHelp(s.netns, pkts, est))
	}
	s.own.Untracked, s.own.UntrackedPackets, s.own.UntrackedEstablished = untracked, pkts, est
}

// readEvents feeds the events queued now to the store. Lost events
// (overrun) are counted and make Run dump again at once.
func (s *Source) readEvents() error {
	s.now = time.Now()
	_, err := s.ev.Read(s.update)
	if errOverrun(err) {
		s.own.Resyncs++
		s.again = true
		return nil
	}
	return err
}

// Poll dumps the table into the store and exports what is due. A failed
// dump reopens the dump socket and leaves missing connections alone.
func (s *Source) Poll() error {
	s.track.snap()
	s.now, s.dumped = time.Now(), 0
	err := s.dump.Dump(s.cfg.Family, s.dumpOne)
	s.own.PollTime = time.Since(s.now)
	if err != nil {
		s.own.PollErrors++
		if d, oerr := Open(Config{Netns: s.cfg.Netns, BufSize: s.cfg.BufSize}); oerr == nil {
			s.dump.Close()
			s.dump = d
		}
		err = fmt.Errorf("conntrack: dump: %w", err)
	} else {
		s.own.Polls++
		if s.ev != nil {
			// A dump makes the kernel drop the expired entries it meets;
			// their destroy events, queued meanwhile, go first, so that
			// their last record holds the kernel's final counters.
			if rerr := s.readEvents(); rerr != nil {
				err = fmt.Errorf("conntrack: events: %w", rerr)
			}
		}
		s.store.EndPoll(s.now)
		s.checkTracking()
	}
	s.store.Export(time.Now(), s.collect)
	if ferr := s.flush(); ferr != nil && err == nil {
		err = ferr
	}
	s.publish()
	return err
}

// collect appends x's record to the batch, emitting a full batch.
func (s *Source) collect(x *Export) {
	s.recs = s.recs[:len(s.recs)+1]
	x.Record(&s.recs[len(s.recs)-1])
	if len(s.recs) == cap(s.recs) {
		_ = s.flush() // counted in EmitErrors
	}
}

// flush emits the batch.
func (s *Source) flush() error {
	if len(s.recs) == 0 {
		return nil
	}
	s.own.Records += uint64(len(s.recs))
	err := s.emit(s.recs)
	if err != nil {
		s.own.EmitErrors++
	}
	s.recs = s.recs[:0]
	return err
}
