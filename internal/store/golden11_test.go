package store

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteGoldenV11 writes testdata/block-v11.bin when WEIR_STORE_GOLDEN
// is set (once, by main's format 11 writer at 7557f64, whose address sets'
// dictionaries carry each entry's rows up to 255 as its class; never
// overwrite it after). Its records are version 10's: the block differs in
// its varint directory and in those classes.
func TestWriteGoldenV11(t *testing.T) {
	if os.Getenv("WEIR_STORE_GOLDEN") == "" {
		t.Skip("set WEIR_STORE_GOLDEN=1 to write testdata/block-v11.bin")
	}
	b, h := newTestEncoder(t).encode(nil, goldenV10Recs())
	if b[12] != 11 || h.cols[cSrcAddr].enc != encADictS {
		t.Fatalf("version %d, SrcAddr encoding %d", b[12], h.cols[cSrcAddr].enc)
	}
	if err := os.WriteFile(filepath.Join("testdata", "block-v11.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
