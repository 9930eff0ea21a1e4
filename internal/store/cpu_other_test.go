//go:build !unix

package store

import "time"

// procCPU is unknown here: the benchmarks report 0 CPU per row.
func procCPU() time.Duration { return 0 }
