package gendb

import (
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/store"
)

// Written is what WriteStore did.
type Written struct {
	Stats   store.Stats   // the store's counters after closing it
	Writing time.Duration // time in the store's Write and FlushAsync of each block and the last Flush (encode, compress, append, the fsyncs it waits for)
	Elapsed time.Duration // all of it, generating too
}

// WriteStore generates cfg's records into a new store in dir, one block
// per interface and time block, and closes it. progress, when not nil, is
// told the rows written so far after each block; tee, when not nil, is
// given each block's records after the store took them (the time it
// takes is not in Writing).
func WriteStore(cfg Config, dir string, noSync bool, progress func(rows int64), tee func([]flow.Record) error) (Written, error) {
	var w Written
	start := time.Now()
	st, err := store.Open(store.Config{Dir: dir, Writeout: 24 * time.Hour, NoSync: noSync})
	if err != nil {
		return w, err
	}
	var rows int64
	err = Generate(cfg, func(_ int64, recs []flow.Record) error {
		t := time.Now()
		err := st.Write(recs)
		if err == nil {
			err = st.FlushAsync() // the block's fsyncs overlap the next block's generating and encoding
		}
		w.Writing += time.Since(t)
		if err == nil && tee != nil {
			err = tee(recs)
		}
		rows += int64(len(recs))
		if progress != nil {
			progress(rows)
		}
		return err
	})
	if err == nil { // every block durable: the commits still in flight are waited for
		t := time.Now()
		err = st.Flush()
		w.Writing += time.Since(t)
	}
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	w.Stats, w.Elapsed = st.Stats(), time.Since(start)
	return w, err
}
