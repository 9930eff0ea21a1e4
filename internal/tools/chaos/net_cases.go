package main

import (
	"crypto/tls"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/ipfix"
)

// slowHeader begins an IPFIX message of 65,535 bytes: a slowloris client
// sends it, then a byte a second.
var slowHeader = []byte{0, 10, 0xff, 0xff}

// exportMsgs encodes recs as weir's IPFIX messages (templates first).
func exportMsgs(recs []flow.Record) []exportMsg {
	var msgs []exportMsg
	last := uint32(0)
	var e *ipfix.Encoder
	e, err := ipfix.NewEncoder(ipfix.Config{Domain: 1}, func(b []byte) error {
		n := e.Sequence() - last
		last = e.Sequence()
		msgs = append(msgs, exportMsg{b: slices.Clone(b), n: int(n)})
		return nil
	})
	if err != nil {
		fatal(err)
	}
	for i := range recs {
		if err := e.Add(&recs[i]); err != nil {
			fatal(err)
		}
	}
	if err := e.Flush(); err != nil {
		fatal(err)
	}
	return msgs
}

// collector is a weir collect process with its metrics address.
type collector struct {
	*proc
	metrics string
	addrs   []string
}

// startCollector runs weir collect on listens (and more flags).
func startCollector(dir string, listens []string, flags ...string) (*collector, error) {
	m := freePort()
	args := []string{"collect", "--metrics-addr", m, "--stats"}
	for _, l := range listens {
		args = append(args, "--listen", l)
	}
	p, err := start(dir, append(args, flags...)...)
	if err != nil {
		return nil, err
	}
	addrs, err := p.waitListening(len(listens), 10*time.Second)
	if err != nil {
		p.stop(syscall.SIGKILL, 5*time.Second)
		return nil, err
	}
	c := &collector{proc: p, metrics: m}
	for _, a := range addrs {
		c.addrs = append(c.addrs, addrOf(a))
	}
	return c, nil
}

// pacedSend sends msgs from a loopback address, keeping at most window
// datagrams ahead of what the collector has read (its messages counter).
func pacedSend(c *collector, from, to string, window int, msgs func(yield func([]byte) bool)) (int, error) {
	u, err := udpFrom(from, to)
	if err != nil {
		return 0, err
	}
	defer u.Close()
	m0, err := metrics(c.metrics)
	if err != nil {
		return 0, err
	}
	base := m0["weir_collector_messages_total"]
	sent := 0
	end := time.Now().Add(120 * time.Second)
	for b := range msgs {
		if _, err := u.Write(b); err != nil {
			return sent, err
		}
		sent++
		if sent%window == 0 {
			if _, ok := waitMetric(c.metrics, time.Until(end), func(m map[string]float64) bool {
				return m["weir_collector_messages_total"]+m["weir_collector_socket_drops_total"]+float64(window) >= base+float64(sent)
			}); !ok {
				return sent, fmt.Errorf("the collector stopped reading after %d datagrams", sent)
			}
		}
	}
	return sent, nil
}

// deliver sends n good records from 127.0.0.1 through weir's exporter and
// waits (≤ 30 s) until the collector counted them; it returns how many
// arrived.
func deliver(c *collector, url string, cfg *tls.Config, n int, seed uint64) (int64, error) {
	return deliverWithin(c, url, cfg, n, seed, 30*time.Second)
}

// lastUndelivered is what the exporter of the last deliver counted as
// undelivered.
var lastUndelivered uint64

// deliverWithin is deliver waiting at most limit. When the exporter counts
// records undelivered it returns an error, and how many arrived anyway.
func deliverWithin(c *collector, url string, cfg *tls.Config, n int, seed uint64, limit time.Duration) (int64, error) {
	m0, err := metrics(c.metrics)
	if err != nil {
		return 0, err
	}
	base := m0["weir_collector_records_total"]
	st, err := export(url, cfg, goodRecords(n, seed, "eth0"), uint32(seed))
	lastUndelivered = st.DroppedRecords
	if err != nil || st.DroppedRecords != 0 {
		time.Sleep(time.Second)
		m, _ := metrics(c.metrics)
		return int64(m["weir_collector_records_total"] - base), fmt.Errorf("exporter: %v, %d undelivered", err, st.DroppedRecords)
	}
	m, _ := waitMetric(c.metrics, limit, func(m map[string]float64) bool {
		return m["weir_collector_records_total"]-base >= float64(n)
	})
	return int64(m["weir_collector_records_total"] - base), nil
}

// caseDomainFlood: one source announces one-field templates under 4,100
// observation domains (more than the 4,096 sessions of old), then a
// second exporter sends 5,000 records: all must arrive.
func caseDomainFlood(r *result) {
	r.tries = 1
	c, err := startCollector(filepath.Join(workDir, "domains"), []string{"udp://127.0.0.1:0"}, "--data-dir", "off", "-o", "none")
	if err != nil {
		r.failf("%v", err)
		return
	}
	defer c.stop(syscall.SIGKILL, 5*time.Second)
	if _, err := pacedSend(c, "127.0.0.2", c.addrs[0], 64, func(yield func([]byte) bool) {
		for dom := range uint32(4100) {
			if !yield(oneFieldMsg(0, dom, false)) {
				return
			}
		}
	}); err != nil {
		r.failf("flood: %v", err)
	}
	got, err := deliver(c, "ipfix+udp://"+c.addrs[0], nil, 5000, 2)
	m, _ := metrics(c.metrics)
	r.lost = 5000 - got
	if err != nil || r.lost != 0 {
		r.failf("after the flood, %d of 5000 records arrived (%v)", got, err)
		r.counted = "no"
	} else {
		r.ok++
	}
	took, ok := c.stop(syscall.SIGINT, 10*time.Second)
	if !ok || took > 2*time.Second {
		r.failf("SIGINT took %v", took)
	}
	r.note = fmt.Sprintf("4,100 domains from 127.0.0.2: %.0f sessions held, %.0f evicted (the flooder's own); %d/5,000 records of a second exporter arrived",
		m["weir_collector_sessions"], m["weir_collector_sessions_evicted_total"], got)
}

// caseTemplateFlood: 1,000 observation domains × 512 templates × 500
// fields (1 GB of templates on the wire, in 64 KB datagrams) from one
// source address into a collector with the default 64 MiB template
// budget, then a real exporter's records from another address: all must
// arrive, and peak RSS must stay within the baseline plus twice the
// budget (Go's GC lets the heap reach twice the live set) plus 32 MiB.
func caseTemplateFlood(r *result) { templateFlood(r, 1) }

// caseTemplateFloodSpread: the same flood from 64 source addresses, so
// that the flooders together fill the whole budget (one address may hold
// 1/16 of it), with --dataless-timeout 15s. A real exporter must still
// get its records through; if it is locked out, the case fails and says
// for how long (until the flood's sessions, which never sent data, are
// forgotten).
func caseTemplateFloodSpread(r *result) { templateFlood(r, 64) }

func templateFlood(r *result, sources int) {
	r.tries = 1
	const budget = 64 * mib
	const dataless = 15 * time.Second
	c, err := startCollector(filepath.Join(workDir, fmt.Sprintf("templates%d", sources)), []string{"udp://127.0.0.1:0"},
		"--data-dir", "off", "-o", "none", "--dataless-timeout", dataless.String())
	if err != nil {
		r.failf("%v", err)
		return
	}
	defer c.stop(syscall.SIGKILL, 5*time.Second)
	pid := c.cmd.Process.Pid
	_, base := procRSS(pid)
	t0 := time.Now()
	var sentBytes int64
	var wg sync.WaitGroup
	// A real exporter sends a record (with its template) every 100 ms
	// throughout the flood: it must not be locked out while it lasts.
	m0, _ := metrics(c.metrics)
	probeStop, probeDone := make(chan struct{}), make(chan int)
	go func() {
		sent := 0
		defer func() { probeDone <- sent }()
		u, err := udpFrom("127.0.0.3", c.addrs[0])
		if err != nil {
			return
		}
		defer u.Close()
		for i := uint32(0); i < 1200; i++ { // at most 2 minutes
			select {
			case <-probeStop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := u.Write(oneFieldMsg(i, 7, true)); err == nil {
				sent++
			}
		}
	}()
	errs := make(chan error, 4)
	senders := min(4, sources)
	for w := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 65535)
			for a := w; a < sources; a += senders {
				from := fmt.Sprintf("127.0.5.%d", 1+a)
				// A quarter of the 8 MiB socket buffer in flight at most.
				n, err := pacedSend(c, from, c.addrs[0], max(1, 32/senders), func(yield func([]byte) bool) {
					for dom := uint32(a); dom < 1000; dom += uint32(sources) {
						for first := 256; first < 256+512; first += 32 {
							if time.Since(t0) > 60*time.Second {
								return
							}
							buf = floodTemplates(buf, dom, uint16(first), 32, 500)
							if !yield(buf) {
								return
							}
						}
					}
				})
				mu.Lock()
				sentBytes += int64(n) * int64(len(buf))
				mu.Unlock()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(probeStop)
	probeSent := <-probeDone
	close(errs)
	for err := range errs {
		r.failf("flood: %v", err)
	}
	flood := time.Since(t0)
	floodEnd := time.Now()
	mp, _ := waitMetric(c.metrics, 5*time.Second, func(m map[string]float64) bool {
		return m["weir_collector_records_total"]-m0["weir_collector_records_total"] >= float64(probeSent)
	})
	probeGot := int(mp["weir_collector_records_total"] - m0["weir_collector_records_total"])
	if probeGot < probeSent*9/10 {
		r.failf("exporter lockout during the flood: %d of %d records of an exporter sending one every 100 ms arrived; %s", probeGot, probeSent, errorsByReason(mp))
	}
	got, err := deliverWithin(c, "ipfix+udp://"+c.addrs[0], nil, 5000, 3, 10*time.Second)
	m, _ := metrics(c.metrics)
	rss, hwm := procRSS(pid)
	r.lost = 5000 - got
	bound := base + 2*budget + 32*mib
	lockout := ""
	switch {
	case err != nil || r.lost != 0:
		r.failf("exporter lockout: after the flood %d of 5000 records of another exporter arrived (%v); %s", got, err, errorsByReason(m))
		r.counted = "no"
		// How long does it last? The flood's sessions never sent data.
		for try := 0; try < 16 && time.Since(floodEnd) < 2*dataless+15*time.Second; try++ {
			time.Sleep(time.Second)
			if n, _ := deliverWithin(c, "ipfix+udp://"+c.addrs[0], nil, 500, uint64(20+try), 2*time.Second); n == 500 {
				lockout = fmt.Sprintf("; LOCKOUT until the flood's sessions expired (--dataless-timeout %v): records arrived again %.0f s after the flood ended", dataless, time.Since(floodEnd).Seconds())
				break
			}
		}
		if lockout == "" {
			lockout = "; LOCKOUT did not end"
		}
	case hwm > bound:
		r.failf("peak RSS %d MiB > baseline %d MiB + 2×budget + 32 MiB", hwm/mib, base/mib)
	case r.fail: // the flood failed, or locked the exporter out while it lasted
		r.lost += int64(probeSent - probeGot)
		r.counted = "no"
	default:
		r.ok++
	}
	r.note = fmt.Sprintf("%d source address(es), %.0f MB of templates in %.0f s: peak RSS %d MiB (baseline %d, bound %d), %d MiB after; state %.1f of %d MiB, %.0f sessions evicted for fairness (budget_full); during the flood %d/%d records of an exporter sending every 100 ms arrived, after it %d/5,000 of another%s",
		sources, float64(sentBytes)/1e6, flood.Seconds(), hwm/mib, base/mib, bound/mib, rss/mib, m["weir_collector_template_state_bytes"]/mib, budget/mib,
		m[`weir_collector_sessions_evicted_total{reason="budget_full"}`], probeGot, probeSent, got, lockout)
}

var mu sync.Mutex

// errorsByReason lists the collector's non-zero decode errors and
// session evictions by reason.
func errorsByReason(m map[string]float64) string {
	var out []string
	for k, v := range m {
		if v != 0 && (strings.HasPrefix(k, "weir_collector_decode_errors_total{") || strings.HasPrefix(k, "weir_collector_sessions_evicted_total{")) {
			out = append(out, fmt.Sprintf("%s %.0f", k, v))
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// caseGarbage: three exporters send 80 messages each of records with
// random interface names (escapes, random bytes, hundreds of names) and
// mostly far times (1677–2262) into a collector writing to a store every
// 300 ms. Every record must be stored; the partitions stay bounded
// (≤ 65 names per exporter, ≤ 3 days per name), blocks are not cut per
// record, and stored names are printable.
func caseGarbage(r *result) {
	r.tries = 3
	dir := filepath.Join(workDir, "garbage", "data")
	c, err := startCollector(filepath.Join(workDir, "garbage"), []string{"udp://127.0.0.1:0"}, "--data-dir", dir, "-o", "none",
		"--writeout", "300ms")
	if err != nil {
		r.failf("%v", err)
		return
	}
	defer c.stop(syscall.SIGKILL, 5*time.Second)
	rng := mrand.New(mrand.NewPCG(21, 11))
	sent, skewed := 0, 0
	t0 := time.Now()
	for _, from := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		seq := uint32(0)
		n, err := pacedSend(c, from, c.addrs[0], 16, func(yield func([]byte) bool) {
			for range 80 {
				recs := hostileRecords(rng, &skewed)
				sent += len(recs)
				b := hostileMsg(seq, recs)
				seq += uint32(len(recs))
				if !yield(b) {
					return
				}
			}
		})
		if err != nil || n != 80 {
			r.failf("%s: %d messages sent: %v", from, n, err)
		} else {
			r.ok++
		}
	}
	m, _ := waitMetric(c.metrics, 30*time.Second, func(m map[string]float64) bool {
		return m["weir_collector_records_total"] >= float64(sent)
	})
	// The store's queue drains (it may lag while a writeout of many
	// partitions runs), then SIGINT: what is still buffered is written
	// at exit or counted lost.
	if _, drained := waitMetric(c.metrics, 30*time.Second, func(m map[string]float64) bool {
		return m[`weir_sink_records_total{sink="store"}`] >= float64(sent)
	}); !drained {
		r.failf("the store's queue took more than 30 s to take %d records", sent)
	}
	elapsed := time.Since(t0)
	took, ok := c.stop(syscall.SIGINT, 30*time.Second)
	if !ok || took > 5*time.Second {
		r.failf("SIGINT took %v", took)
	}
	stderr := c.errText()
	written, _ := statNumber(storeLine(stderr), "store: ")
	blocks, _ := statNumber(storeLine(stderr), " records in ")
	dropped := storeDropped(stderr)
	r.lost = int64(sent) - written
	if r.lost != dropped {
		r.failf("%d records sent, %d stored, %d counted as dropped", sent, written, dropped)
		r.counted = "no"
	} else if r.lost > 0 {
		r.counted = "yes"
	}
	ifaces, days := 0, 0
	bad := ""
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		ifaces++
		if strings.ContainsFunc(e.Name(), func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			bad = e.Name()
		}
		ds, _ := os.ReadDir(filepath.Join(dir, e.Name()))
		days += len(ds)
		if len(ds) > 3 {
			r.failf("interface directory %q has %d days", e.Name(), len(ds))
		}
	}
	if ifaces > 3*65 {
		r.failf("%d interface directories for 3 exporters (at most 64 names each and '(other)')", ifaces)
	}
	if bad != "" {
		r.failf("an interface directory name has control characters: %q", bad)
	}
	writeouts := int64(elapsed/(300*time.Millisecond)) + 2
	if blocks > int64(days)*writeouts {
		r.failf("%d blocks for %d partitions in %d writeouts: cut per record", blocks, days, writeouts)
	}
	rowsPerBlock := float64(written) / float64(max(blocks, 1))
	r.note = fmt.Sprintf("%d records (%d with far times: %.0f retimed); %d interface dirs, %d day partitions, %d blocks (%.1f rows/block, ≤ 1 per partition and writeout)",
		sent, skewed, m["weir_collector_records_retimed_total"], ifaces, days, blocks, rowsPerBlock)
}
