//go:build linux

package calibrate

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/testhost"
)

// noneLeft fails if a tool's process outlived the test.
func noneLeft(t *testing.T, name string) {
	t.Cleanup(func() {
		if out, err := exec.Command("pgrep", "-f", name+" .*-p 4[5-6]").Output(); err == nil && len(out) > 0 {
			t.Errorf("%s still running: %s", name, out)
		}
	})
}

func TestIperf3(t *testing.T) {
	testhost.Skip(t)
	testhost.Need(t, "iperf3", "iperf3")
	noneLeft(t, "iperf3")
	p := testhost.NewPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v6 := range []bool{false, true} {
		r, err := Iperf3(ctx, p.A, p.B, v6, time.Second, 1, 128<<10)
		if err != nil {
			t.Fatal(err)
		}
		if r.BitsPerSec < 1e8 || r.Duration != time.Second || r.Streams != 1 || r.WriteSize != 128<<10 {
			t.Errorf("v6=%v: %+v", v6, r)
		}
		t.Logf("iperf3 v6=%v: %.2f Gbit/s, %d retransmits", v6, r.BitsPerSec/1e9, r.Retransmits)
	}
}

func TestSockperf(t *testing.T) {
	testhost.Skip(t)
	testhost.Need(t, "sockperf", "sockperf")
	noneLeft(t, "sockperf")
	p := testhost.NewPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tcp := range []bool{false, true} {
		r, err := Sockperf(ctx, p.A, p.B, false, tcp, time.Second, 64)
		if err != nil {
			t.Fatal(err)
		}
		if r.AvgRTT < time.Microsecond || r.AvgRTT > 10*time.Millisecond || r.P50RTT > r.P99RTT || r.MsgSize != 64 {
			t.Errorf("tcp=%v: %+v", tcp, r)
		}
		t.Logf("sockperf %s: avg %v p50 %v p99 %v", r.Proto, r.AvgRTT, r.P50RTT, r.P99RTT)
	}
	if _, err := Sockperf(ctx, p.A, p.B, true, false, time.Second, 64); !errors.Is(err, ErrNoIPv6) {
		t.Errorf("IPv6: %v", err)
	}
}
