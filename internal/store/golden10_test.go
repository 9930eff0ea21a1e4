package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// goldenV10Recs are the records of block-v10.bin: version 9's, with every
// 7th row's reverse packets and bytes 0, so that RevBytes leaves the rows
// without packets out (flag 16, new in version 10).
func goldenV10Recs() []flow.Record {
	recs := goldenV9Recs()
	for i := range recs {
		if i%7 == 3 {
			recs[i].RevPackets, recs[i].RevBytes = 0, 0
		}
	}
	return recs
}

// TestWriteGoldenV10 writes testdata/block-v10.bin when WEIR_STORE_GOLDEN
// is set (once, by main's format 10 writer at dfc33ca; never overwrite it
// after).
func TestWriteGoldenV10(t *testing.T) {
	if os.Getenv("WEIR_STORE_GOLDEN") == "" {
		t.Skip("set WEIR_STORE_GOLDEN=1 to write testdata/block-v10.bin")
	}
	b, h := newTestEncoder(t).encode(nil, goldenV10Recs())
	if b[12] != 10 || h.cols[cRevBytes].flags != flagPerPkt|flagNoPkt {
		t.Fatalf("version %d, RevBytes flags %d", b[12], h.cols[cRevBytes].flags)
	}
	if err := os.WriteFile(filepath.Join("testdata", "block-v10.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
