//go:build !unix

package ipfix

import (
	"time"
)

func cpuTime() time.Duration { return 0 }
