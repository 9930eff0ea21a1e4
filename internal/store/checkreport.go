package store

import (
	"fmt"
	"io"
	"strconv"
)

// WriteSummary writes what 'weir store check' says at the end: the
// partitions and blocks checked with the records they hold, then, when
// anything is damaged, what and how much, and whether it was repaired
// (repair) or how to repair it (the store in dir).
func (r *CheckReport) WriteSummary(w io.Writer, dir string, repair bool) {
	fmt.Fprintf(w, "%d partitions: %s blocks intact (%s records)", r.Partitions, count(int64(r.Blocks)), count(r.Rows))
	damaged := len(r.Problems) > r.NewerBlocks // problems other than a newer weir's blocks
	if r.NewerBlocks > 0 {
		fmt.Fprintf(w, "; %s blocks (%s records) written by a newer weir: not read, left as they are", count(int64(r.NewerBlocks)), count(r.NewerRows))
	}
	if damaged {
		fmt.Fprintf(w, "; %s blocks damaged (%s records lost", count(int64(r.DamagedBlocks)), count(r.DamagedRows))
		if r.UnknownRows > 0 {
			fmt.Fprintf(w, ", and those of %d stretches no index lists", r.UnknownRows)
		}
		fmt.Fprintf(w, "), %d indexes damaged, %d files with bytes after their last block; %d problems", r.BadIndexes, r.Tails, len(r.Problems))
	}
	fmt.Fprintln(w)
	if r.WriterRunning {
		fmt.Fprintln(w, "a capture was writing meanwhile: what it appended or pruned during the check may show as damage; check again once it stops")
	}
	if r.NewerBlocks > 0 {
		fmt.Fprintln(w, "read and check this store with the newer weir that wrote it (this one cannot, and does not repair it)")
	}
	switch {
	case !damaged:
	case repair:
		fmt.Fprintf(w, "%d partitions repaired\n", r.Repaired)
	default:
		fmt.Fprintf(w, "run 'weir store check --repair --data-dir %s' (with no capture writing there) to repair\n", dir)
	}
}

// count formats n with thousands separators: 100,000.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}
