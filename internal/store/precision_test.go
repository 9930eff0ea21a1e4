package store

import (
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// TestTimePrecision: by default Start is floored and End ceiled to the
// millisecond (an interval only widens), rows come back in Start order,
// counts are untouched; at 1ns times are exact; a bad precision is refused.
func TestTimePrecision(t *testing.T) {
	ms := int64(time.Millisecond)
	b0 := t0 + int64(time.Hour) // not midnight: a row a nanosecond earlier stays in the same day
	recs := []flow.Record{
		{Packets: 1, Start: b0 + 5*ms + 999_999, End: b0 + 7*ms + 1}, // → 5ms .. 8ms
		{Packets: 2, Start: b0 + 2*ms, End: b0 + 2*ms},               // exact already
		{Packets: 3, Start: b0 - 1, End: b0 + 3*ms - 1},              // → -1ms .. 3ms
		{Packets: 4, Start: b0 + 5*ms + 1, End: b0 + 5*ms + 2},       // → 5ms .. 6ms, after row 1 (stable)
	}
	for i := range recs {
		recs[i].Iface, recs[i].Key.IPVersion = "eth0", 4
	}
	type want struct{ pkts, start, end int64 }
	for _, c := range []struct {
		prec time.Duration
		want []want
	}{
		{0, []want{{3, b0 - ms, b0 + 3*ms}, {2, b0 + 2*ms, b0 + 2*ms}, {1, b0 + 5*ms, b0 + 8*ms}, {4, b0 + 5*ms, b0 + 6*ms}}},
		{time.Nanosecond, []want{{3, b0 - 1, b0 + 3*ms - 1}, {2, b0 + 2*ms, b0 + 2*ms}, {4, b0 + 5*ms + 1, b0 + 5*ms + 2}, {1, b0 + 5*ms + 999_999, b0 + 7*ms + 1}}},
	} {
		s := openT(t, Config{NoSync: true, TimePrecision: c.prec})
		if err := s.Write(recs); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		bl, _ := s.Blocks(0, 0, nil)
		var cols Columns
		if len(bl) != 1 || s.ReadBlock(&bl[0], ColPackets|ColStart|ColEnd, &cols) != nil {
			t.Fatalf("precision %v: %d blocks", c.prec, len(bl))
		}
		for i, w := range c.want {
			if int64(cols.Packets[i]) != w.pkts || cols.Start[i] != w.start || cols.End[i] != w.end {
				t.Errorf("precision %v row %d: %d packets %d..%d, want %d packets %d..%d", c.prec, i,
					cols.Packets[i], cols.Start[i]-b0, cols.End[i]-b0, w.pkts, w.start-b0, w.end-b0)
			}
		}
		if bl[0].MinStart != c.want[0].start {
			t.Errorf("precision %v: block MinStart %d, want %d", c.prec, bl[0].MinStart-b0, c.want[0].start-b0)
		}
		s.Close()
	}
	if recs[0].Start != b0+5*ms+999_999 {
		t.Error("Write changed the caller's records")
	}
	if _, err := Open(Config{Dir: tempDir(t), TimePrecision: -time.Second}); err == nil {
		t.Error("negative precision accepted")
	}
}
