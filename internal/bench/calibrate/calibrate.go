// Package calibrate runs the reference tools weir bench compares its own
// driver with — iperf3 for a TCP stream, sockperf for UDP or TCP
// ping-pong, both Debian packages — between two test hosts, and reads
// their results.
package calibrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/internal/bench/result"
	"github.com/weir-dev/weir/internal/testhost"
)

// ErrNoIPv6 is returned by Sockperf for IPv6: sockperf 3.7 takes IPv4
// addresses only.
var ErrNoIPv6 = errors.New("calibrate: sockperf 3.7 does not do IPv6")

// Ports: one per call, so calls never meet each other's TIME_WAIT.
var nextPort atomic.Int32

func port() int { return 45000 + int(nextPort.Add(1)%2000) }

// maxOutput bounds what is kept of a tool's output.
const maxOutput = 4 << 20

// capped is a bounded output buffer.
type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := maxOutput - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// server runs a tool's server in h's namespace until stop is called.
type server struct {
	cmd *exec.Cmd
	out capped
}

func startServer(h *testhost.Host, name string, args ...string) (*server, error) {
	bin, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %s is not installed (apt-get install %s)", name, name)
	}
	s := &server{cmd: exec.Command("ip", append([]string{"netns", "exec", h.Name, bin}, args...)...)}
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	s.cmd.SysProcAttr = killWithParent()
	s.cmd.WaitDelay = time.Second
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("calibrate: %s: %w", name, err)
	}
	return s, nil
}

func (s *server) stop() {
	_ = s.cmd.Process.Kill() // it may have exited already
	_ = s.cmd.Wait()         // "killed": expected; only its output matters
}

// waitListen polls ss in h until something listens on port (TCP) or is
// bound to it (UDP); nothing is sent to the port.
func waitListen(ctx context.Context, h *testhost.Host, proto string, port int) error {
	flag := "-Hltn"
	if proto == "udp" {
		flag = "-Hlun"
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		out, err := h.Exec(ctx, "ss", flag, fmt.Sprintf("sport = :%d", port))
		if err == nil && len(bytes.TrimSpace(out)) > 0 {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("calibrate: nothing listens on %s port %d after 5 s", proto, port)
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 400 {
		s = "..." + s[len(s)-400:]
	}
	return s
}

// seconds rounds d up to whole seconds, at least 1: the tools take -t in
// seconds.
func seconds(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }

// Iperf3 runs iperf3's TCP stream test from client to server (streams
// parallel streams of writeSize-byte writes for dur, rounded up to whole
// seconds) and returns the receiver's rate. The Weir* fields are left for
// the caller.
func Iperf3(ctx context.Context, srv, cli *testhost.Host, v6 bool, dur time.Duration, streams, writeSize int) (*result.Iperf3, error) {
	p := port()
	addr := srv.Addr(v6).String()
	s, err := startServer(srv, "iperf3", "-s", "-1", "-B", addr, "-p", strconv.Itoa(p))
	if err != nil {
		return nil, err
	}
	defer s.stop()
	if err := waitListen(ctx, srv, "tcp", p); err != nil {
		return nil, fmt.Errorf("%w: %s", err, tail(s.out.Bytes()))
	}
	secs := seconds(dur)
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs+20)*time.Second)
	defer cancel()
	out, err := cli.Exec(ctx, "iperf3", "-c", addr, "-B", cli.Addr(v6).String(), "-p", strconv.Itoa(p),
		"-t", strconv.Itoa(secs), "-P", strconv.Itoa(streams), "-l", strconv.Itoa(writeSize), "-J")
	r, perr := ParseIperf3(out)
	if perr != nil {
		if err != nil {
			return nil, fmt.Errorf("calibrate: iperf3: %v: %s", err, tail(out))
		}
		return nil, perr
	}
	r.Duration, r.Streams, r.WriteSize = time.Duration(secs)*time.Second, streams, writeSize
	return r, nil
}

// ParseIperf3 reads `iperf3 -J` output.
func ParseIperf3(out []byte) (*result.Iperf3, error) {
	var j struct {
		End struct {
			SumSent struct {
				Retransmits uint64 `json:"retransmits"`
			} `json:"sum_sent"`
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				Seconds       float64 `json:"seconds"`
			} `json:"sum_received"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(out, &j); err != nil {
		return nil, fmt.Errorf("calibrate: iperf3 output: %v: %s", err, tail(out))
	}
	if j.Error != "" {
		return nil, fmt.Errorf("calibrate: iperf3: %s", j.Error)
	}
	if j.End.SumReceived.BitsPerSecond <= 0 {
		return nil, fmt.Errorf("calibrate: iperf3 reports no received rate: %s", tail(out))
	}
	return &result.Iperf3{BitsPerSec: j.End.SumReceived.BitsPerSecond, Retransmits: j.End.SumSent.Retransmits}, nil
}

// Sockperf runs sockperf's ping-pong test (UDP, or TCP with tcp) from
// client to server for dur (whole seconds) with msgSize-byte messages and
// returns its round trips (--full-rtt). IPv6 gives ErrNoIPv6.
func Sockperf(ctx context.Context, srv, cli *testhost.Host, v6, tcp bool, dur time.Duration, msgSize int) (*result.Sockperf, error) {
	if v6 {
		return nil, ErrNoIPv6
	}
	p := port()
	addr := srv.Addr(false).String()
	args := []string{"server", "-i", addr, "-p", strconv.Itoa(p)}
	proto := "udp"
	if tcp {
		args, proto = append(args, "--tcp"), "tcp"
	}
	s, err := startServer(srv, "sockperf", args...)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	if err := waitListen(ctx, srv, proto, p); err != nil {
		return nil, fmt.Errorf("%w: %s", err, tail(s.out.Bytes()))
	}
	secs := seconds(dur)
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs+20)*time.Second)
	defer cancel()
	cargs := []string{"ping-pong", "-i", addr, "-p", strconv.Itoa(p), "-t", strconv.Itoa(secs), "-m", strconv.Itoa(msgSize), "--full-rtt"}
	if tcp {
		cargs = append(cargs, "--tcp")
	}
	out, err := cli.Exec(ctx, "sockperf", cargs...)
	r, perr := ParseSockperf(out)
	if perr != nil {
		if err != nil {
			return nil, fmt.Errorf("calibrate: sockperf: %v: %s", err, tail(out))
		}
		return nil, perr
	}
	r.Duration, r.Proto, r.MsgSize = time.Duration(secs)*time.Second, proto, msgSize
	return r, nil
}

var (
	spAvg = regexp.MustCompile(`avg-rtt=([0-9.]+)`)
	spPct = regexp.MustCompile(`percentile (\d+\.\d+) =\s*([0-9.]+)`)
)

// ParseSockperf reads `sockperf ping-pong --full-rtt` output (microseconds).
func ParseSockperf(out []byte) (*result.Sockperf, error) {
	us := func(s string) time.Duration {
		v, _ := strconv.ParseFloat(s, 64)
		return time.Duration(v * 1000)
	}
	r := &result.Sockperf{}
	m := spAvg.FindSubmatch(out)
	if m == nil {
		if bytes.Contains(out, []byte("avg-lat=")) {
			return nil, errors.New("calibrate: sockperf printed one-way latency: --full-rtt was not applied")
		}
		return nil, fmt.Errorf("calibrate: no avg-rtt in sockperf's output: %s", tail(out))
	}
	r.AvgRTT = us(string(m[1]))
	for _, p := range spPct.FindAllSubmatch(out, -1) {
		switch string(p[1]) {
		case "50.000":
			r.P50RTT = us(string(p[2]))
		case "99.000":
			r.P99RTT = us(string(p[2]))
		}
	}
	if r.AvgRTT <= 0 || r.P50RTT <= 0 || r.P99RTT <= 0 {
		return nil, fmt.Errorf("calibrate: sockperf's output lacks the average or the 50th/99th percentiles: %s", tail(out))
	}
	return r, nil
}
