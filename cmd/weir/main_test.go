package main

import (
	"os"
	"testing"
)

// TestMain keeps tests from writing a store into the source tree: captures
// in tests store nothing unless a test passes --data-dir.
//
// With WEIR_TEST_AS_WEIR=1 the test binary is weir itself: commands that
// re-execute weir (bench lbstress runs each configuration in a fresh
// process) work under test.
func TestMain(m *testing.M) {
	if os.Getenv("WEIR_TEST_AS_WEIR") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Setenv("WEIR_DATA_DIR", "off")
	os.Exit(m.Run())
}
