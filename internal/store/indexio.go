package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// readIndex loads the index of partition directory d. A missing index is
// os.ErrNotExist; a damaged one is rebuilt from the intact blocks of the
// data file and returned with errBadIndex (gaps are the damaged stretches
// the scan skipped).
func readIndex(d *dirH) (x *index, gaps []gap, err error) {
	f, err := d.open(indexName, os.O_RDONLY, 0)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxIndexSize+1))
	f.Close()
	if err != nil {
		return nil, nil, err
	}
	x, perr := parseIndex(b)
	if perr == nil && len(b) <= maxIndexSize {
		return x, nil, nil
	}
	x, gaps, err = scanIndex(d)
	if err != nil {
		return nil, nil, err
	}
	return x, gaps, errBadIndex
}

// scanIndex builds an index of every intact block in d's data file.
func scanIndex(d *dirH) (*index, []gap, error) {
	x := &index{epoch: newEpoch(), iface: unescapeIface(filepath.Base(filepath.Dir(d.path)))}
	f, err := d.open(dataName, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return x, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	sc := scanner{r: f, size: st.Size()}
	var g, gaps []gap
	x.entries, g = sc.scan()
	end := int64(0)
	for _, e := range x.entries {
		end = e.off + int64(e.blockLen)
	}
	x.dataLen = end
	for _, gp := range g { // what follows the last intact block is an unfinished write's tail, not damage
		if gp.off < end {
			gaps = append(gaps, gp)
		}
	}
	return x, gaps, nil
}

// writeIndex replaces d's index atomically: a new temp file (any old one,
// or a link in its place, is removed first: O_EXCL never opens someone
// else's file), fsync, rename over the index, fsync of the directory.
func writeIndex(d *dirH, x *index, sync bool, perm os.FileMode) (int, error) {
	b := x.marshal()
	if err := d.remove(indexTemp); err != nil {
		return 0, fmt.Errorf("store: write index: %w", err)
	}
	f, err := d.open(indexTemp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return 0, fmt.Errorf("store: write index: %w", err)
	}
	_, err = f.Write(b)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.rename(indexTemp, indexName)
	}
	if err == nil && sync {
		err = d.sync()
	}
	if err != nil {
		return 0, fmt.Errorf("store: write index: %w", err)
	}
	return len(b), nil
}
