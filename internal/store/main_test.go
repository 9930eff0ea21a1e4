package store

import (
	"flag"
	"os"
	"testing"
)

// fuzzMinimize is this package's -fuzzminimizetime unless one is given.
// Go's minimizer tries every pair of cut points of each new input until
// its time is up (60 s by default); a block is checksummed and addressed
// by offsets, so almost no cut keeps the new coverage, and every new
// input used to cost the whole minute with no exec reported: the fuzzer
// looked stalled at 0 execs/s. Inputs are kept small (maxFuzzInput) and
// minimizing is cut short.
const fuzzMinimize = "5s"

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.fuzzminimizetime" })
	if !given {
		if err := flag.Set("test.fuzzminimizetime", fuzzMinimize); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
