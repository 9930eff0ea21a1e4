//go:build linux

package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/weir-dev/weir/internal/bench/calibrate"
	"github.com/weir-dev/weir/internal/bench/engine"
	"github.com/weir-dev/weir/internal/bench/profile"
	"github.com/weir-dev/weir/internal/bench/result"
)

// Calibration shapes: iperf3's default TCP stream (one stream, 128 KiB
// writes) and sockperf's default ping-pong (UDP, 64-byte messages), each
// run by the reference tool and then by weir's driver on the same hosts.
const (
	calWriteSize = 128 << 10
	calMsgSize   = 64
)

// runCalibration runs the reference tools between the server and the first
// client on the primary network, and weir's driver in the same shapes.
func runCalibration(ctx context.Context, cfg *Config, h *hosts) *result.Calibration {
	cal := &result.Calibration{}
	calDuration := cfg.CalTime
	if calDuration <= 0 {
		calDuration = 3 * time.Second
	}
	calDuration = calDuration.Round(time.Second) // the tools take whole seconds
	if calDuration < cfg.CalTime {
		calDuration += time.Second
	}
	calDuration = max(calDuration, time.Second)
	srv, cli := h.server[0], h.clients[0][0]
	cfg.logf("calibrating: iperf3 TCP stream, %v", calDuration)
	ip, err := calibrate.Iperf3(ctx, srv, cli, false, calDuration, 1, calWriteSize)
	if err != nil {
		cal.Errors = append(cal.Errors, err.Error())
	} else {
		stream := &profile.Profile{Name: "calibrate-stream", Groups: []profile.Group{{Threads: 1, Txns: []profile.Txn{
			{Iterations: 1, Ops: []profile.Op{{Kind: profile.Connect, Proto: profile.TCP}}},
			{Duration: calDuration, Ops: []profile.Op{{Kind: profile.Write, Size: calWriteSize, Count: 1}}},
			{Iterations: 1, Ops: []profile.Op{{Kind: profile.Disconnect}}},
		}}}}
		if r, err := driver(ctx, cfg, h, stream); err != nil {
			cal.Errors = append(cal.Errors, "weir stream: "+err.Error())
		} else if len(r.Txns) > 1 {
			ip.WeirBitsPerSec = r.Txns[1].BytesPerSec * 8
			if ip.BitsPerSec > 0 {
				ip.Ratio = ip.WeirBitsPerSec / ip.BitsPerSec
			}
		}
		cal.Iperf3 = ip
	}
	cfg.logf("calibrating: sockperf UDP ping-pong, %v", calDuration)
	sp, err := calibrate.Sockperf(ctx, srv, cli, false, false, calDuration, calMsgSize)
	if err != nil {
		cal.Errors = append(cal.Errors, err.Error())
	} else {
		pp := &profile.Profile{Name: "calibrate-pingpong", Groups: []profile.Group{{Threads: 1, Txns: []profile.Txn{
			{Iterations: 1, Ops: []profile.Op{{Kind: profile.Connect, Proto: profile.UDP}}},
			{Duration: calDuration, Ops: []profile.Op{{Kind: profile.SendTo, Size: calMsgSize, Count: 1}, {Kind: profile.RecvFrom, Size: calMsgSize, Count: 1}}},
			{Iterations: 1, Ops: []profile.Op{{Kind: profile.Disconnect}}},
		}}}}
		if r, err := driver(ctx, cfg, h, pp); err != nil {
			cal.Errors = append(cal.Errors, "weir ping-pong: "+err.Error())
		} else if len(r.Txns) > 1 {
			l := r.Txns[1].Latency
			sp.WeirAvgRTT, sp.WeirP50RTT, sp.WeirP99RTT = l.Avg, l.P50, l.P99
			if sp.AvgRTT > 0 {
				sp.Ratio = float64(sp.WeirAvgRTT) / float64(sp.AvgRTT)
			}
		}
		cal.Sockperf = sp
	}
	return cal
}

// driver runs p with one pair on the existing hosts, without capture.
func driver(ctx context.Context, cfg *Config, h *hosts, p *profile.Profile) (*result.Run, error) {
	c := *cfg
	c.Observe, c.Pairs, c.Timeout = nil, 1, 0
	c.BasePort = cfg.BasePort + 20000 // clear of the profile's ports and their TIME_WAIT
	plan := engine.Plan{Profile: p, Pairs: 1, BasePort: c.BasePort}
	if err := plan.Check(); err != nil {
		return nil, err
	}
	hh := *h
	hh.clients = h.clients[:1]
	r := &result.Run{}
	if err := traffic(ctx, &c, plan, &hh, r); err != nil {
		return nil, err
	}
	if len(r.Errors) > 0 {
		return r, fmt.Errorf("%s", r.Errors[0])
	}
	return r, nil
}
