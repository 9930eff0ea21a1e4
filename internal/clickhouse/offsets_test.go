package clickhouse

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/testfleet"
)

// testOffsets: weir ingest's offsets table, as Setup creates it, gives
// back per partition the highest offset recorded, whatever order the rows
// came in, only for the group and topic asked (hostile names included),
// with query parameters and with literals.
func testOffsets(t *testing.T, c Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := testfleet.Unique("weir_offsets")
	defer Exec(context.Background(), c, NewStmt(false).S("DROP DATABASE IF EXISTS ", db))
	res, err := Setup(ctx, c, Config{Database: db})
	if err != nil {
		t.Fatal(err)
	}
	group, topic := "g' OR 1 = 1 --\\", "weir-flows\t{p0:String}"
	for _, rows := range []map[int32]int64{{0: 5, 1: 9}, {0: 7}, {0: 6, 2: 0}} { // a lower offset recorded later does not lower the mark
		if err := RecordOffsets(ctx, c, db, group, topic, rows, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := RecordOffsets(ctx, c, db, "other", topic, map[int32]int64{0: 100}, nil); err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{0: 7, 1: 9, 2: 0}
	for _, params := range []bool{false, res.Features.Params} {
		f := res.Features
		f.Params = params
		got, err := LoadOffsets(ctx, c, f, db, group, topic)
		if err != nil || !maps.Equal(got, want) {
			t.Errorf("params %v: offsets %v (%v), want %v", params, got, err, want)
		}
		if got, err := LoadOffsets(ctx, c, f, db, group, "weir-flows"); err != nil || len(got) != 0 {
			t.Errorf("params %v: another topic: %v (%v), want none", params, got, err)
		}
	}
	if err := RecordOffsets(ctx, c, db, group, topic, map[int32]int64{0: -1}, nil); err == nil {
		t.Error("a negative offset was recorded")
	}
	if _, err := Setup(ctx, c, Config{Database: db}); err != nil { // idempotent over the table
		t.Fatal(err)
	}
	if got, _ := LoadOffsets(ctx, c, res.Features, db, group, topic); !maps.Equal(got, want) {
		t.Errorf("after a second setup: %v", got)
	}
}
