//go:build !unix

package flow

import (
	"testing"
	"time"
)

func cpuTime() time.Duration { return 0 }

// reportCPU reports nothing where getrusage is missing.
func reportCPU(*testing.B, time.Duration) {}
