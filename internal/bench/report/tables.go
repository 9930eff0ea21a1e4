package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/bench/result"
)

// opName names a flow op of the run's profile: "write 16k×16".
func opName(r *result.Run, o result.OpStats) string {
	s := o.Kind
	if o.Proto != "" {
		s += " " + o.Proto
	}
	if o.Size > 0 {
		s += " " + iec(uint64(o.Size))
	}
	if p := r.Profile; p != nil && o.Group < len(p.Groups) && o.Txn < len(p.Groups[o.Group].Txns) && o.Op < len(p.Groups[o.Group].Txns[o.Txn].Ops) {
		if c := p.Groups[o.Group].Txns[o.Txn].Ops[o.Op].Count; c > 1 {
			s += fmt.Sprintf(" ×%d", c)
		}
	}
	return s
}

// txnName is "g0/t1" with the group's and transaction's names.
func txnName(g, t int, gname, tname string) string {
	s := fmt.Sprintf("g%d/t%d", g, t)
	if gname != "" {
		s += " " + gname
	}
	if tname != "" {
		s += "/" + tname
	}
	return s
}

// WriteRun prints a run as aligned tables: header, transactions, flow ops,
// interfaces, CPU, and observe, calibration and errors when present.
func WriteRun(w io.Writer, r *result.Run) error {
	var b strings.Builder
	name := "?"
	if r.Profile != nil {
		name = r.Profile.Name
	}
	h := r.Host
	fmt.Fprintf(&b, "profile %s (%s), weir %s, %s\n", name, r.ProfileFile, r.WeirVersion, r.Started.Format(time.RFC3339))
	fmt.Fprintf(&b, "host %s: %s, %d cpus, %s, kernel %s, %s\n", h.Hostname, h.CPUModel, h.CPUs, iec(h.MemBytes), h.Kernel, h.GoVersion)
	o := r.Options
	fmt.Fprintf(&b, "%d pair(s), %s hub, secondary network %v, offloads %v, MTU %d; traffic %v\n\n",
		o.Pairs, o.Hub, o.Secondary, o.Offloads, o.MTU, r.Elapsed.Round(time.Millisecond))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	tx := &table{title: "Transactions (latency of one iteration)"}
	tx.add("transaction", "iterations", "avg", "p50", "p99", "min", "max", "bytes/s", "iter/s")
	for _, t := range r.Txns {
		l := t.Latency
		tx.add(txnName(t.Group, t.Txn, t.GroupName, t.Name), count(l.Count), dur(l.Avg), dur(l.P50), dur(l.P99), dur(l.Min), dur(l.Max),
			si(t.BytesPerSec, "B/s"), si(t.OpsPerSec, ""))
	}
	ops := &table{title: "Flow ops (latency of one call)"}
	ops.add("flow op", "kind", "calls", "avg", "p50", "p99", "min", "max", "bytes/s", "ops/s", "lost")
	for _, op := range r.Ops {
		l := op.Latency
		lost := ""
		if op.Lost > 0 {
			lost = count(op.Lost)
		}
		ops.add(fmt.Sprintf("g%d/t%d/o%d", op.Group, op.Txn, op.Op), opName(r, op), count(l.Count), dur(l.Avg), dur(l.P50), dur(l.P99), dur(l.Min), dur(l.Max),
			si(op.BytesPerSec, "B/s"), si(op.OpsPerSec, ""), lost)
	}
	nic := &table{title: "NICs (kernel counters over the traffic)"}
	nic.add("host", "iface", "net", "rx pkts/s", "tx pkts/s", "rx bits/s", "tx bits/s", "drops")
	for _, n := range r.NICs {
		nic.add(n.Host, n.Iface, n.Net, si(n.RxPktsPS, "pps"), si(n.TxPktsPS, "pps"), si(n.RxBitsPS, "bit/s"), si(n.TxBitsPS, "bit/s"), count(n.RxDrops+n.TxDrops))
	}
	cpu := &table{title: "CPU"}
	cpu.add("side", "user", "system", "% of a core")
	for _, c := range r.CPU {
		cpu.add(c.Side, dur(c.User), dur(c.System), fmt.Sprintf("%.1f", c.Percent))
	}
	obs := &table{title: "Observed vs sent"}
	obs.add("mode", "where", "conns", "matched", "NIC pkts", "seen pkts", "NIC bytes", "seen bytes", "ok")
	var diffs []string
	for _, x := range r.Observe {
		obs.add(x.Mode, x.Where, fmt.Sprint(x.Conns), fmt.Sprint(x.Matched), count(x.NICPkts), count(x.SeenPkts), count(x.NICBytes), count(x.SeenBytes), fmt.Sprint(x.OK))
		for _, d := range x.Diffs {
			diffs = append(diffs, x.Mode+": "+d)
		}
	}
	for _, t := range []*table{tx, ops, nic, cpu, obs} {
		if err := t.write(w); err != nil {
			return err
		}
	}
	b.Reset()
	for _, d := range diffs {
		fmt.Fprintf(&b, "  %s\n", d)
	}
	if c := r.Calibrate; c != nil {
		cal := &table{title: "Calibration (same hosts, same run)"}
		cal.add("test", "reference", "weir's driver", "weir / reference")
		if i := c.Iperf3; i != nil {
			cal.add(fmt.Sprintf("iperf3 TCP stream, %d×%s writes", i.Streams, iec(uint64(i.WriteSize))), si(i.BitsPerSec, "bit/s"), si(i.WeirBitsPerSec, "bit/s"), fmt.Sprintf("%.3f", i.Ratio))
		}
		if s := c.Sockperf; s != nil {
			cal.add(fmt.Sprintf("sockperf %s ping-pong %d B, avg RTT", s.Proto, s.MsgSize), dur(s.AvgRTT), dur(s.WeirAvgRTT), fmt.Sprintf("%.3f", s.Ratio))
			cal.add("  p50 RTT", dur(s.P50RTT), dur(s.WeirP50RTT), "")
			cal.add("  p99 RTT", dur(s.P99RTT), dur(s.WeirP99RTT), "")
		}
		var cb strings.Builder
		_ = cal.write(&cb) // a strings.Builder does not fail
		b.WriteString(cb.String())
		for _, e := range c.Errors {
			fmt.Fprintf(&b, "calibration: %s\n", e)
		}
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "error: %s\n", e)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteRunOutputs shows a finished run: its tables on stdout, or its JSON
// there with jsonOut "-"; with another jsonOut, also its JSON in that
// file, said on log.
func WriteRunOutputs(r *result.Run, jsonOut string, stdout, log io.Writer) error {
	if jsonOut == "-" {
		return r.Write(stdout)
	}
	_ = WriteRun(stdout, r) // to stdout: nowhere else to report
	if jsonOut == "" {
		return nil
	}
	if err := r.WriteFile(jsonOut); err != nil {
		return err
	}
	fmt.Fprintf(log, "weir bench: result written to %s\n", jsonOut)
	return nil
}
