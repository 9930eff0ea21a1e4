package main

import (
	"os"
	"testing"
)

// TestMain keeps tests from writing a store into the source tree: captures
// in tests store nothing unless a test passes --data-dir.
func TestMain(m *testing.M) {
	os.Setenv("WEIR_DATA_DIR", "off")
	os.Exit(m.Run())
}
