package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/weir-dev/weir/internal/bench/profile"
	"github.com/weir-dev/weir/internal/bench/report"
	"github.com/weir-dev/weir/internal/bench/runner"
	"github.com/weir-dev/weir/internal/testhost"
)

// runBenchRun is `weir bench run PROFILE`.
func runBenchRun(args []string, stdout_, stderr io.Writer) int {
	var (
		cfg     runner.Config
		opt     runner.Options
		jsonOut string
		sets    listFlag
	)
	fs := helpFlagSet("bench run")
	fs.IntVar(&cfg.Pairs, "pairs", 1, "client/server pairs (client hosts), like Ripsaw's instances")
	fs.StringVar(&opt.Hub, "hub", "bridge", "how the primary network joins the hosts: bridge or router")
	fs.BoolVar(&cfg.Secondary, "secondary", false, "build the second network even if the profile does not use it")
	fs.StringVar(&opt.Offloads, "offloads", "on", "segmentation offloads (TSO, GSO, GRO) on the test interfaces: on or off (--observe turns them off)")
	fs.StringVar(&opt.Observe, "observe", "", "comma-separated capture `modes` to check against the traffic: afpacket, ebpf, conntrack")
	fs.BoolVar(&cfg.Strict, "strict", false, "fail when --observe finds a difference")
	fs.BoolVar(&cfg.Calibrate, "calibrate", false, "also run iperf3 and sockperf on the same hosts")
	fs.DurationVar(&cfg.CalTime, "calibrate-time", 3*time.Second, "duration of each calibration test (the tools take whole seconds)")
	fs.StringVar(&jsonOut, "json", "", "write the result to `file` ('-': standard output, instead of the tables)")
	fs.Var(&sets, "set", "`name=value` for a uperf $name (repeatable; the environment is used otherwise)")
	fs.DurationVar(&cfg.Timeout, "timeout", 0, "bound on the traffic phase (default: 3× the profile's durations + 1m)")
	fs.IntVar(&cfg.BasePort, "base-port", 20000, "first server port")
	pos, done, code := parseInterleaved(fs, args, stdout_, stderr)
	if done {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "weir bench run: want one PROFILE file\nRun 'weir bench run --help' for usage.")
		return exitUsage
	}
	file := pos[0]
	opt.Sets = sets
	lookup, err := opt.Apply(&cfg)
	if err != nil {
		fmt.Fprintf(stderr, "weir bench run: %v\n", err)
		return exitUsage
	}
	p, err := profile.Load(file, lookup)
	if err != nil {
		fmt.Fprintf(stderr, "weir bench run: %v\n", err)
		return exitUsage
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "weir bench run: %v\n", err)
		return exitFailure
	}
	cfg.Profile, cfg.ProfileFile, cfg.Version, cfg.Log = p, file, version, stderr
	cfg.Child = func(role string) (string, []string) {
		if role == "" {
			return exe, nil
		}
		return exe, []string{"bench", "_child", role}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	run, err := runner.Run(ctx, cfg)
	if run != nil {
		if err := report.WriteRunOutputs(run, jsonOut, stdout_, stderr); err != nil {
			fmt.Fprintf(stderr, "weir bench run: %v\n", err)
			return exitFailure
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "weir bench run: %v\n", err)
		if errors.Is(err, testhost.ErrUnsupported) {
			fmt.Fprintln(stderr, "weir bench run: test hosts need root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2")
		}
		return exitFailure
	}
	if len(run.Errors) > 0 {
		fmt.Fprintf(stderr, "weir bench run: %d errors during the run (listed above)\n", len(run.Errors))
		return exitFailure
	}
	fmt.Fprintf(stderr, "weir bench: done in %v\n", time.Since(start).Round(time.Millisecond))
	return exitOK
}

// runBenchChild is `weir bench _child server|client`: one side of a bench
// run, driven by its parent over standard input and output.
func runBenchChild(args []string, stdout_, stderr io.Writer) int {
	fs := newFlagSet("bench _child", "weir bench _child server|client", "One side of a bench run, started by 'weir bench run'.", "")
	pos, done, code := parseInterleaved(fs, args, stdout_, stderr)
	if done {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "weir bench _child: want server or client (started by weir bench run)")
		return exitUsage
	}
	args = pos
	var err error
	switch args[0] {
	case "server":
		err = runner.Serve(os.Stdin, stdout_)
	case "client":
		err = runner.Client(os.Stdin, stdout_)
	default:
		fmt.Fprintln(stderr, "weir bench _child: want server or client")
		return exitUsage
	}
	if err != nil {
		fmt.Fprintf(stderr, "weir bench _child %s: %v\n", args[0], err)
		return exitFailure
	}
	return exitOK
}
