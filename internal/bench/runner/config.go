// Package runner is weir bench run: it builds the test hosts (one server
// host, one client host per pair, and the second network when the profile
// uses it), starts the traffic engine in each of them as a child process
// (the server side in one, a client in each of the others), relays the
// clients' stop handshakes, reads the interfaces' kernel counters and the
// children's CPU time, and, when asked, runs weir's capture beside the
// traffic (Observe) and the reference tools after it (calibration).
package runner

import (
	"errors"
	"io"
	"time"

	"github.com/weir-dev/weir/internal/bench/profile"
	"github.com/weir-dev/weir/internal/testhost"
)

// Modes are the capture modes Observe runs.
var Modes = []string{"afpacket", "ebpf", "conntrack"}

// Config is one run.
type Config struct {
	Profile     *profile.Profile
	ProfileFile string
	Pairs       int              // client/server pairs (clients hosts), ≥ 1
	Hub         testhost.HubKind // how the primary network joins the hosts
	Secondary   bool             // build the second network even if the profile does not use it
	Offloads    bool             // leave TSO/GSO/GRO on (Observe turns them off)
	Observe     []string         // capture modes run on the server's interfaces
	Strict      bool             // a difference in Observe is an error
	Calibrate   bool             // run iperf3 and sockperf after the profile
	CalTime     time.Duration    // each calibration test's duration (0: 3 s)
	// Child returns the command that runs this program as a bench child
	// with role "server" or "client" (e.g. weir bench _child server).
	Child   func(role string) (exe string, args []string)
	Version string
	// Timeout bounds the traffic phase (0: three times the profile's
	// durations plus a minute).
	Timeout  time.Duration
	BasePort int       // first server port (0: 20000)
	Log      io.Writer // progress lines (nil: none)
}

// ErrDifference is returned (wrapped) by a strict run whose capture saw
// something else than was sent.
var ErrDifference = errors.New("observed traffic differs from what was sent")
