package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// caseSlowClients: 1,000 slowloris TCP clients (an IPFIX header, then a byte every
// second) and 1,000 TLS clients (half of them silent, half sending half
// a ClientHello) from 4 loopback addresses hold the collector; an
// exporter on another address must deliver 3,000 records over TCP and
// TLS meanwhile, the collector must not spin, and SIGINT must end it
// within 2 s with every client still connected.
func caseSlowClients(r *result) {
	dir := filepath.Join(workDir, "slow")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fatal(err)
	}
	pk, err := writePKI(dir)
	if err != nil {
		r.failf("pki: %v", err)
		return
	}
	c, err := startCollector(dir, []string{"tcp://127.0.0.1:0", "tls://127.0.0.1:0"}, "--data-dir", "off", "-o", "none",
		"--tls-cert", pk.serverCert, "--tls-key", pk.serverKey)
	if err != nil {
		r.failf("%v", err)
		return
	}
	defer c.stop(syscall.SIGKILL, 5*time.Second)
	var conns []net.Conn
	var cmu sync.Mutex
	defer func() {
		for _, x := range conns {
			x.Close()
		}
	}()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	attempts := 0
	for i := range 2000 {
		from := fmt.Sprintf("127.0.6.%d", 1+i%4)
		to := c.addrs[i%2] // even: tcp, odd: tls
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
		attempts++
		x, err := d.Dial("tcp", to)
		if err != nil {
			continue
		}
		cmu.Lock()
		conns = append(conns, x)
		cmu.Unlock()
		switch {
		case i%2 == 0: // slowloris: a byte of a message header, then one a second
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := x.Write(slowHeader); err != nil { // a message of 65,535 bytes begins
					return
				}
				for range 60 {
					if _, err := x.Write([]byte{0}); err != nil {
						return
					}
					select {
					case <-stop:
						return
					case <-time.After(time.Second):
					}
				}
			}()
		case i%4 == 1: // half a ClientHello
			_, _ = x.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00}) // a hostile client: a write the collector refuses is the point
		}
	}
	time.Sleep(time.Second)
	m0, _ := metrics(c.metrics)
	pid := c.cmd.Process.Pid
	cpu0 := cpuTime(pid)
	time.Sleep(2 * time.Second)
	spin := cpuTime(pid) - cpu0
	r.tries = 2
	tlsCfg := &tls.Config{RootCAs: pk.pool}
	var got int64
	for i, url := range []string{"ipfix+tcp://" + c.addrs[0], "ipfix+tls://" + c.addrs[1]} {
		n, err := deliver(c, url, tlsCfg, 1500, uint64(10+i))
		got += n
		if err != nil || n != 1500 {
			r.failf("%s: %d of 1500 records arrived while clients were stuck (%v)", url, n, err)
		} else {
			r.ok++
		}
	}
	r.lost = 3000 - got
	if spin > time.Second {
		r.failf("the collector used %v of CPU in 2 s with stuck clients (spinning)", spin)
	}
	m, _ := metrics(c.metrics)
	took, ok := c.stop(syscall.SIGINT, 10*time.Second)
	if !ok || took > 2*time.Second {
		r.failf("SIGINT with %d clients connected: exit took %v (want ≤ 2 s)", len(conns), took.Round(time.Millisecond))
		r.ok = 0
	}
	close(stop)
	if r.lost > 0 {
		r.counted = "no"
	}
	r.note = fmt.Sprintf("2,000 stuck clients from 4 addresses: %.0f held, %.0f rejected (per-source cap), %.0f handshake timeouts; CPU %v in 2 s; 3,000/3,000 records (TCP, TLS) from another address; SIGINT exit %v",
		m0["weir_collector_connections"], m["weir_collector_connections_rejected_total"],
		m[`weir_collector_connections_closed_total{reason="handshake_timeout"}`], spin.Round(10*time.Millisecond), took.Round(time.Millisecond))
	wg.Wait()
}

// caseTLSRefused: weir capture exports over ipfix+tls:// to a collector
// whose certificate it does not trust (another CA), then to a collector
// that requires a client certificate it does not have: every record must
// be counted undelivered, and the collector must have received none.
func caseTLSRefused(r *result) {
	dir := filepath.Join(workDir, "tlsrefused")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fatal(err)
	}
	pk, err := writePKI(dir)
	if err != nil {
		r.failf("pki: %v", err)
		return
	}
	allCounted := true
	for try, setup := range []struct {
		what   string
		collFl []string
		ca     string
	}{
		{"server certificate from an unknown CA", nil, pk.otherCA},
		{"client certificate required, none sent", []string{"--tls-client-ca", pk.ca}, pk.ca},
	} {
		r.tries++
		c, err := startCollector(filepath.Join(dir, fmt.Sprint(try)), []string{"tls://127.0.0.1:0"},
			append([]string{"--data-dir", "off", "-o", "none", "--tls-cert", pk.serverCert, "--tls-key", pk.serverKey}, setup.collFl...)...)
		if err != nil {
			r.failf("%v", err)
			continue
		}
		p, err := start(filepath.Join(dir, fmt.Sprint(try), "capture"), "capture", "--synthetic", "flows=5000,packets=10000",
			"--export", "ipfix+tls://"+c.addrs[0], "--export-ca", setup.ca, "-o", "none", "--stats", "--data-dir", "off")
		if err != nil {
			r.failf("%v", err)
			c.stop(syscall.SIGKILL, 5*time.Second)
			continue
		}
		exited := p.wait(60 * time.Second)
		m, _ := metrics(c.metrics)
		c.stop(syscall.SIGINT, 10*time.Second)
		stderr := p.errText()
		records, _ := statNumber(stderr, "records     ")
		var undelivered int64
		if i := strings.Index(stderr, "export: "); i >= 0 {
			line, _, _ := strings.Cut(stderr[i:], "\n")
			if j := strings.Index(line, "; "); j >= 0 {
				undelivered, _ = statNumber(line[j:], "; ")
			}
		}
		received := int64(m["weir_collector_records_total"])
		lost := records - received
		r.lost += lost
		ok := exited && records > 0
		if !exited {
			r.failf("%s: the capture did not exit within 60 s", setup.what)
		}
		if undelivered != lost {
			allCounted = false
			r.failf("%s: %d records, the collector received %d, the exporter counts %d undelivered:\n%s", setup.what, records, received,
				undelivered, tail(stderr))
			ok = false
		}
		if ok {
			r.ok++
		}
		vlogf("   %s: %d records, %d received, %d undelivered", setup.what, records, received, undelivered)
	}
	r.counted = map[bool]string{true: "yes", false: "no"}[allCounted]
	r.note = "every record counted undelivered by the exporter (--stats, weir_export_undelivered_records_total); the collector received none"
}

// caseUDPOverflow: the collector is stopped (SIGSTOP) while 30,000
// one-record datagrams arrive, so its socket buffer overflows; after
// SIGCONT and one more datagram, the kernel's drop count (SO_RXQ_OVFL)
// and the records lost by sequence number must both equal what was sent
// and not received.
func caseUDPOverflow(r *result) {
	r.tries = 1
	c, err := startCollector(filepath.Join(workDir, "overflow"), []string{"udp://127.0.0.1:0"}, "--data-dir", "off", "-o", "none",
		"--sockets", "1")
	if err != nil {
		r.failf("%v", err)
		return
	}
	defer c.stop(syscall.SIGKILL, 5*time.Second)
	u, err := udpFrom("127.0.0.2", c.addrs[0])
	if err != nil {
		r.failf("%v", err)
		return
	}
	defer u.Close()
	seq := uint32(0)
	send := func() {
		_, _ = u.Write(oneFieldMsg(seq, 1, true)) // UDP: a lost datagram is what the case counts
		seq++
	}
	send()
	if _, ok := waitMetric(c.metrics, 10*time.Second, func(m map[string]float64) bool { return m["weir_collector_records_total"] == 1 }); !ok {
		r.failf("the first record did not arrive")
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGSTOP)
	for range 30000 {
		send()
	}
	_ = c.cmd.Process.Signal(syscall.SIGCONT)
	// Let it drain, then one more datagram carries the final drop count.
	var last float64
	waitMetric(c.metrics, 30*time.Second, func(m map[string]float64) bool {
		n := m["weir_collector_messages_total"]
		same := n == last
		last = n
		time.Sleep(200 * time.Millisecond)
		return same && n > 0
	})
	send()
	m, _ := waitMetric(c.metrics, 10*time.Second, func(m map[string]float64) bool { return m["weir_collector_messages_total"] == last+1 })
	sent := int64(seq)
	received := int64(m["weir_collector_records_total"])
	drops := int64(m["weir_collector_socket_drops_total"])
	lostSeq := int64(m["weir_collector_lost_records_total"])
	r.lost = sent - received
	took, ok := c.stop(syscall.SIGINT, 10*time.Second)
	switch {
	case r.lost == 0:
		r.failf("nothing was lost: the probe did not overflow the socket (%d sent)", sent)
	case drops != r.lost || lostSeq != r.lost:
		r.failf("%d sent, %d received: %d socket drops, %d records lost by sequence", sent, received, drops, lostSeq)
		r.counted = "no"
	case !ok || took > 2*time.Second:
		r.failf("SIGINT took %v", took)
	default:
		r.ok++
		r.counted = "yes"
	}
	r.note = fmt.Sprintf("%d datagrams of one record; %d received; %d socket drops (SO_RXQ_OVFL), %d records lost by sequence number", sent, received, drops, lostSeq)
}

// caseSlowManySources: slowloris clients from 128 loopback addresses, 16
// each (the per-source cap), 2,048 in all, a byte every second: together
// they can hold the whole global --max-conns (1,024) without ever being
// idle. An exporter from another address must still deliver 1,500
// records over TCP within 10 s; if it is locked out the case fails.
func caseSlowManySources(r *result) {
	r.tries = 1
	c, err := startCollector(filepath.Join(workDir, "slowmany"), []string{"tcp://127.0.0.1:0"}, "--data-dir", "off", "-o", "none")
	if err != nil {
		r.failf("%v", err)
		return
	}
	defer c.stop(syscall.SIGKILL, 5*time.Second)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var cmu sync.Mutex
	var conns []net.Conn
	for i := range 2048 {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.0.7.%d", 1+i%128))}, Timeout: 2 * time.Second}
		x, err := d.Dial("tcp", c.addrs[0])
		if err != nil {
			continue
		}
		cmu.Lock()
		conns = append(conns, x)
		cmu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := x.Write(slowHeader); err != nil { // a message of 65,535 bytes begins
				return
			}
			for range 60 {
				if _, err := x.Write([]byte{0}); err != nil {
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
				}
			}
		}()
	}
	defer func() {
		close(stop)
		for _, x := range conns {
			x.Close()
		}
		wg.Wait()
	}()
	time.Sleep(time.Second)
	m0, _ := metrics(c.metrics)
	got, err := deliverWithin(c, "ipfix+tcp://"+c.addrs[0], nil, 1500, 30, 10*time.Second)
	m, _ := metrics(c.metrics)
	r.lost = 1500 - got
	if err != nil || got != 1500 {
		r.failf("exporter lockout: %d of 1500 records arrived with %.0f slow clients held (%v)", got, m0["weir_collector_connections"], err)
		if int64(lastUndelivered) == r.lost {
			r.counted = "yes" // by the exporter (weir_export_undelivered_records_total)
		} else {
			r.counted = "no"
			r.failf("%d records lost, the exporter counts %d undelivered: the others were acknowledged by the collector's kernel on a connection it then closed (over --max-conns)", r.lost, lastUndelivered)
		}
	} else {
		r.ok++
	}
	took, ok := c.stop(syscall.SIGINT, 10*time.Second)
	if !ok || took > 2*time.Second {
		r.failf("SIGINT with %d clients connected: exit took %v (want ≤ 2 s)", len(conns), took.Round(time.Millisecond))
	}
	r.note = fmt.Sprintf("2,048 slowloris clients from 128 addresses: %.0f held (--max-conns), %.0f rejected, %.0f evicted (%.0f partial messages, %.0f bytes, counted); %d/1,500 records of another exporter arrived; SIGINT exit %v",
		m0["weir_collector_connections"], m["weir_collector_connections_rejected_total"], m[`weir_collector_connections_closed_total{reason="evicted"}`],
		m["weir_collector_partial_messages_total"], m["weir_collector_partial_bytes_total"], got, took.Round(time.Millisecond))
}
