package calibrate

import "syscall"

// killWithParent makes the kernel kill a reference server when weir dies,
// so no iperf3 or sockperf outlives a crashed run.
func killWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
