//go:build linux

package ebpf

import (
	"fmt"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// jiffyClock turns the jiffies the programs stamp a flow's latest packet
// with (one inlined load, where reading a clock costs a helper call) into
// CLOCK_MONOTONIC: at each drain weir_clock reads both at once, and a
// jiffy is the coarse clock's resolution (the kernel's tick). The result
// is within a tick of the packet's time, as the coarse clock's would be.
type jiffyClock struct {
	prog     *ebpf.Program
	j, ns    *ebpf.Variable
	tick     int64  // ns per jiffy
	atJ      uint64 // jiffies at the last read
	atNs     int64  // CLOCK_MONOTONIC at the last read
	testData []byte
}

// init sets the clock up and reads it once.
func (c *jiffyClock) init(prog *ebpf.Program, j, ns *ebpf.Variable) error {
	if prog == nil || j == nil || ns == nil {
		return fmt.Errorf("ebpf: the clock program or its variables are missing")
	}
	var ts unix.Timespec
	if err := unix.ClockGetres(unix.CLOCK_MONOTONIC_COARSE, &ts); err != nil {
		return fmt.Errorf("ebpf: the tick length: %w", err)
	}
	c.prog, c.j, c.ns, c.tick = prog, j, ns, ts.Nano()
	if c.tick <= 0 {
		return fmt.Errorf("ebpf: the coarse clock's resolution is %v", ts)
	}
	c.testData = make([]byte, 14) // an Ethernet header: the least a tc test run takes
	return c.read()
}

// read runs weir_clock and keeps both readings.
func (c *jiffyClock) read() error {
	if _, err := c.prog.Run(&ebpf.RunOptions{Data: c.testData}); err != nil {
		return fmt.Errorf("ebpf: reading the kernel's clocks: %w", err)
	}
	var ns uint64
	if err := c.j.Get(&c.atJ); err != nil {
		return fmt.Errorf("ebpf: reading the kernel's clocks: %w", err)
	}
	if err := c.ns.Get(&ns); err != nil {
		return fmt.Errorf("ebpf: reading the kernel's clocks: %w", err)
	}
	c.atNs = int64(ns)
	return nil
}

// mono returns the CLOCK_MONOTONIC time of jiffy j.
func (c *jiffyClock) mono(j uint64) int64 {
	return c.atNs - int64(c.atJ-j)*c.tick // j after atJ (a ring record): the difference wraps negative, as it should
}
