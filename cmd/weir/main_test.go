package main

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/sink"
)

// TestMain keeps tests from writing a store into the source tree: captures
// in tests store nothing unless a test passes --data-dir.
//
// With WEIR_TEST_AS_WEIR=1 the test binary is weir itself: commands that
// re-execute weir (bench lbstress runs each configuration in a fresh
// process) work under test, and tests can signal a weir process. With
// WEIR_TEST_STORE_FAULT=fail or hang as well, its store fails every write
// or never returns from one (see faultySink). Commands run in the test's
// own process never drop privileges; weir processes do (buildWeir builds
// weir without cgo, so that they can).
func TestMain(m *testing.M) {
	if os.Getenv("WEIR_TEST_AS_WEIR") == "1" {
		if f := os.Getenv("WEIR_TEST_STORE_FAULT"); f != "" {
			storeFault = func(s sink.Sink) sink.Sink { return &faultySink{mode: f, inner: s} }
		}
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Setenv("WEIR_DATA_DIR", "off")
	dropPrivileges = false // in process: the tests after this one need them
	os.Exit(m.Run())
}

// errInjected is what a failing faultySink returns.
var errInjected = errors.New("injected store failure: no space left on device")

// faultySink stands in for a store on a full disk ("fail": every write
// takes 50 ms and fails) or a hung one ("hang": a write never returns;
// "hangclose": writes reach the store, Close never returns).
type faultySink struct {
	mode  string
	inner sink.Sink
}

func (f *faultySink) Write(recs []flow.Record) error {
	if f.mode == "hangclose" {
		return f.inner.Write(recs)
	}
	if f.mode == "hang" {
		time.Sleep(24 * time.Hour) // a hung disk: never returns (a timer, not a deadlock)
	}
	time.Sleep(50 * time.Millisecond)
	return errInjected
}

func (f *faultySink) Close() error {
	if f.mode == "hang" || f.mode == "hangclose" {
		time.Sleep(24 * time.Hour)
	}
	f.inner.Close()
	return errInjected
}
