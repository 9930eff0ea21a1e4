// Command chaos runs the hostile probes of issue 21 against a built weir
// binary — kill -9 during store writes, a full disk, damaged blocks,
// exporter floods, garbage names and times, slow TLS and TCP clients, a
// refused TLS export, a UDP socket overflow — and prints one table: case,
// tries, survived, records lost, and whether every loss was counted. It
// exits 1 if any case failed. Traffic stays on loopback; every loop is
// bounded in count and time (the whole run takes a few minutes).
//
//	go run ./internal/tools/chaos -weir bin/weir [-only kill9,damage] [-keep]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// result is one row of the table.
type result struct {
	name           string
	tries, ok      int
	lost           int64
	counted        string // yes, no, or n/a (nothing lost, or a crash: see the case)
	note           string
	fail           bool   // the case failed (a try did not survive, or a loss was not counted)
	skipped        string // why the case did not run
	elapsed        time.Duration
	failureReasons []string
}

// failf records why a try failed.
func (r *result) failf(format string, a ...any) {
	r.fail = true
	r.failureReasons = append(r.failureReasons, fmt.Sprintf(format, a...))
}

var (
	// panics are the weir processes that panicked or died of a fatal
	// runtime error (their stderr), for the case that ran them.
	panics   []string
	panicsMu sync.Mutex

	// live are the weir processes running and mounts the tmpfs mounted:
	// an interrupted run (scripts/chaos.sh's time limit) kills and
	// unmounts them.
	live      = map[*proc]bool{}
	mounts    []string
	cleanMu   sync.Mutex
	doneSoFar []*result

	weirBin string
	workDir string
	verbose bool
)

type chaosCase struct {
	name string
	run  func(r *result)
}

func main() {
	flag.StringVar(&weirBin, "weir", "bin/weir", "the weir `binary` to probe")
	only := flag.String("only", "", "run only these comma-separated `cases`")
	keep := flag.Bool("keep", false, "keep the work directory (its path is printed)")
	flag.BoolVar(&verbose, "v", false, "say what each try does")
	flag.Parse()
	abs, err := filepath.Abs(weirBin)
	if err != nil {
		fatal(err)
	}
	weirBin = abs
	if _, err := os.Stat(weirBin); err != nil {
		fatal(fmt.Errorf("%v: build it first (make build)", err))
	}
	if workDir, err = os.MkdirTemp("", "weir-chaos-"); err != nil {
		fatal(err)
	}
	if !*keep {
		defer func() { _ = os.RemoveAll(workDir) }() // best effort: the run's result is already printed
	} else {
		fmt.Fprintln(os.Stderr, "chaos: work directory", workDir)
	}
	cases := []chaosCase{
		{"kill9-store", caseKill9},
		{"disk-full", caseDiskFull},
		{"damaged-blocks", caseDamage},
		{"domain-flood", caseDomainFlood},
		{"template-flood", caseTemplateFlood},
		{"template-flood-64-sources", caseTemplateFloodSpread},
		{"garbage-names-times", caseGarbage},
		{"slow-clients", caseSlowClients},
		{"slow-clients-128-sources", caseSlowManySources},
		{"tls-export-refused", caseTLSRefused},
		{"udp-overflow", caseUDPOverflow},
	}
	want := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	start := time.Now()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		cleanMu.Lock()
		for p := range live {
			_ = p.cmd.Process.Kill() // it may have exited already
		}
		for _, m := range mounts {
			_ = unmountLazy(m)
		}
		results := doneSoFar
		cleanMu.Unlock()
		logf("interrupted (%v): the cases run so far", sig)
		printTable(os.Stdout, results, time.Since(start))
		if !*keep {
			_ = os.RemoveAll(workDir)
		}
		os.Exit(1)
	}()
	var results []*result
	for _, c := range cases {
		if len(want) > 0 && !want[c.name] {
			continue
		}
		r := &result{name: c.name, counted: "n/a"}
		t0 := time.Now()
		logf("== %s", c.name)
		c.run(r)
		panicsMu.Lock()
		for _, p := range panics {
			r.failf("%s", p)
		}
		panics = nil
		panicsMu.Unlock()
		r.elapsed = time.Since(t0)
		logf("   %s: %d/%d survived, %d lost, counted %s (%v) %s", c.name, r.ok, r.tries, r.lost, r.counted,
			r.elapsed.Round(time.Second), r.note)
		results = append(results, r)
		cleanMu.Lock()
		doneSoFar = results
		cleanMu.Unlock()
	}
	failed := printTable(os.Stdout, results, time.Since(start))
	if failed {
		os.Exit(1)
	}
}

// printTable prints the table and each failure's reasons; it says whether
// any case failed.
func printTable(w io.Writer, results []*result, total time.Duration) bool {
	failed := false
	fmt.Fprintf(w, "\n| case | tries | survived | records lost | loss counted | time | notes |\n|---|---:|---:|---:|---|---:|---|\n")
	for _, r := range results {
		if r.skipped != "" {
			fmt.Fprintf(w, "| %s | 0 | – | – | – | – | SKIPPED: %s |\n", r.name, r.skipped)
			continue
		}
		status := ""
		if r.fail {
			status, failed = "FAILED; ", true
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %s | %.0fs | %s%s |\n", r.name, r.tries, r.ok, r.lost, r.counted,
			r.elapsed.Seconds(), status, r.note)
	}
	fmt.Fprintf(w, "\ntotal %.0f s\n", total.Seconds())
	for _, r := range results {
		for _, why := range r.failureReasons {
			fmt.Fprintf(w, "FAIL %s: %s\n", r.name, why)
		}
	}
	return failed
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "chaos: "+format+"\n", a...)
}

func vlogf(format string, a ...any) {
	if verbose {
		logf(format, a...)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "chaos:", err)
	os.Exit(2)
}

// proc is a weir process.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr string // files
	done           chan struct{}
	err            error
}

// start runs weir with args; its output goes to files in dir.
func start(dir string, args ...string) (*proc, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &proc{stdout: filepath.Join(dir, "stdout"), stderr: filepath.Join(dir, "stderr"), done: make(chan struct{})}
	so, err := os.Create(p.stdout)
	if err != nil {
		return nil, err
	}
	se, err := os.Create(p.stderr)
	if err != nil {
		so.Close()
		return nil, err
	}
	p.cmd = exec.Command(weirBin, args...)
	p.cmd.Stdout, p.cmd.Stderr = so, se
	vlogf("   weir %s", strings.Join(args, " "))
	if err := p.cmd.Start(); err != nil {
		so.Close()
		se.Close()
		return nil, err
	}
	cleanMu.Lock()
	live[p] = true
	cleanMu.Unlock()
	go func() {
		p.err = p.cmd.Wait()
		cleanMu.Lock()
		delete(live, p)
		cleanMu.Unlock()
		so.Close()
		se.Close()
		if t := p.errText(); strings.Contains(t, "panic: ") || strings.Contains(t, "fatal error: ") {
			panicsMu.Lock()
			panics = append(panics, fmt.Sprintf("weir %s panicked:\n%s", strings.Join(args, " "), tail(t)))
			panicsMu.Unlock()
		}
		close(p.done)
	}()
	return p, nil
}

// wait waits at most d for p to exit; false if it did not (then it is
// killed).
func (p *proc) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		_ = p.cmd.Process.Kill() // it may have exited already
		<-p.done
		return false
	}
}

// stop sends sig and says how long p took to exit (killed after limit:
// false).
func (p *proc) stop(sig syscall.Signal, limit time.Duration) (time.Duration, bool) {
	t0 := time.Now()
	_ = p.cmd.Process.Signal(sig) // it may have exited already: stop then reports its status
	ok := p.wait(limit)
	return time.Since(t0), ok
}

func (p *proc) errText() string {
	b, _ := os.ReadFile(p.stderr)
	return string(b)
}

func (p *proc) outText() string {
	b, _ := os.ReadFile(p.stdout)
	return string(b)
}

// waitListening waits until p said it listens on n addresses and returns
// them ("udp 127.0.0.1:1234").
func (p *proc) waitListening(n int, limit time.Duration) ([]string, error) {
	end := time.Now().Add(limit)
	for {
		var addrs []string
		for _, l := range strings.Split(p.errText(), "\n") {
			if a, ok := strings.CutPrefix(l, "weir collect: listening on "); ok {
				addrs = append(addrs, a)
			}
		}
		if len(addrs) >= n {
			return addrs, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("weir exited: %v\n%s", p.err, tail(p.errText()))
		default:
		}
		if time.Now().After(end) {
			return nil, fmt.Errorf("not listening after %v:\n%s", limit, tail(p.errText()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// addrOf is the host:port of a "udp 127.0.0.1:1234" line.
func addrOf(line string) string {
	_, a, _ := strings.Cut(line, " ")
	return a
}

// tail is the last lines of s.
func tail(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-8):], "\n")
}

// freePort is a loopback TCP port free now.
func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// metrics scrapes a weir's /metrics and sums each metric's series by
// name (labels dropped), and also keeps "name{labels}" lines.
func metrics(addr string) (map[string]float64, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			continue
		}
		series := l[:i]
		name, _, _ := strings.Cut(series, "{")
		m[name] += v
		if series != name {
			m[series] = v
		}
	}
	return m, sc.Err()
}

// waitMetric polls addr until cond holds on its metrics or limit passes.
func waitMetric(addr string, limit time.Duration, cond func(m map[string]float64) bool) (map[string]float64, bool) {
	end := time.Now().Add(limit)
	var m map[string]float64
	for {
		var err error
		if m, err = metrics(addr); err == nil && cond(m) {
			return m, true
		}
		if time.Now().After(end) {
			return m, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procRSS is a process's resident set and its peak (VmRSS, VmHWM) in bytes.
func procRSS(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = n << 10
		case "VmHWM:":
			hwm = n << 10
		}
	}
	return
}

// cpuTime is a process's user+system CPU time.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * time.Second / 100 // USER_HZ
}

// statNumber finds "prefix N" in text (commas allowed) and returns N.
func statNumber(text, prefix string) (int64, bool) {
	i := strings.Index(text, prefix)
	if i < 0 {
		return 0, false
	}
	s := text[i+len(prefix):]
	j := 0
	for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == ',') {
		j++
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(s[:j], ",", ""), 10, 64)
	return n, err == nil
}

const mib = 1 << 20
