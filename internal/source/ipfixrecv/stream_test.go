package ipfixrecv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/ipfix"
	ipfixsink "github.com/weir-dev/weir/internal/sink/ipfix"
	"github.com/weir-dev/weir/internal/testpki"
)

// tlsConfigs returns a server configuration requiring client
// certificates and a client's with one.
func tlsConfigs(t *testing.T) (srv, cli *tls.Config) {
	t.Helper()
	pki := testpki.Write(t, t.TempDir())
	kp, err := tls.LoadX509KeyPair(pki.ServerCert, pki.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(pki.CA)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	srv = &tls.Config{Certificates: []tls.Certificate{kp}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	if cli, err = ipfixsink.TLSConfig(pki.CA, pki.ClientCert, pki.ClientKey); err != nil {
		t.Fatal(err)
	}
	return srv, cli
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("waited 20 s for %s", what)
		}
	}
}

// waitStats polls cond on c's counters for up to 20 s, and shows them if
// it does not hold by then.
func waitStats(t *testing.T, c *Collector, what string, cond func(Stats) bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !cond(c.Stats()); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("waited 20 s for %s: %+v", what, c.Stats())
		}
	}
}

// dialFrom connects to addr from the loopback address src.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// exportTo sends recs to url with weir's exporter and checks none was
// dropped on the way out.
func exportTo(t *testing.T, url string, cfg *tls.Config, recs []flow.Record) {
	t.Helper()
	x, err := ipfixsink.New(ipfixsink.Config{URL: url, TLS: cfg, Domain: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(recs); i += 100 {
		if err := x.Write(recs[i:min(i+100, len(recs))]); err != nil {
			t.Fatal(err)
		}
	}
	x.Close()
	if st := x.Stats(); st.DroppedRecords != 0 {
		t.Fatalf("exporter dropped: %+v", st)
	}
}

// encodeMsgs returns weir's IPFIX messages of recs.
func encodeMsgs(t *testing.T, cfg ipfix.Config, recs []flow.Record) [][]byte {
	t.Helper()
	var msgs [][]byte
	e, err := ipfix.NewEncoder(cfg, func(b []byte) error { msgs = append(msgs, slices.Clone(b)); return nil })
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		e.Add(&recs[i])
	}
	e.Flush()
	return msgs
}

// TestStuckClients: TLS clients that send nothing or half a ClientHello
// are closed after the handshake timeout, a silent TCP client after the
// idle timeout, each counted; the slots come back, the collector does not
// spin (the old per-read deadline made a failed handshake's error repeat
// at once, forever, on two cores), and an exporter still delivers
// everything.
func TestStuckClients(t *testing.T) {
	srv, _ := tlsConfigs(t)
	c, m, stop := run(t, Config{Listen: []string{"tls://127.0.0.1:0", "tcp://127.0.0.1:0"}, TLS: srv,
		HandshakeTimeout: 500 * time.Millisecond, IdleConnTimeout: 500 * time.Millisecond})
	defer stop()
	tlsAddr, tcpAddr := c.Addrs()[0].String(), c.Addrs()[1].String()
	var clients []net.Conn
	defer func() {
		for _, k := range clients {
			k.Close()
		}
	}()
	for i := range 10 {
		k := dialFrom(t, "127.0.0.2", tlsAddr)
		if i%2 == 1 {
			k.Write([]byte{0x16, 3, 1, 2, 0, 1, 0, 1, 0xfc, 3, 3}) // a ClientHello's first bytes
		}
		clients = append(clients, k)
	}
	for range 5 {
		clients = append(clients, dialFrom(t, "127.0.0.3", tcpAddr))
	}
	waitStats(t, c, "the handshake and idle timeouts", func(st Stats) bool {
		return st.HandshakeTimeouts == 10 && st.ConnsIdleClosed == 5 && st.ConnsOpen == 0
	})
	for _, k := range clients { // the collector closed them: reads end
		k.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := k.Read(make([]byte, 64)); err == nil {
			t.Errorf("client %v: the collector still talks", k.LocalAddr())
		}
	}
	before, t0 := cpuTime(), time.Now()
	time.Sleep(time.Second)
	if used, wall := cpuTime()-before, time.Since(t0); used > wall/4 {
		t.Errorf("idle collector used %v of CPU in %v", used, wall)
	}
	want := randRecords(300, 11)
	exportTo(t, "ipfix+tcp://"+tcpAddr, nil, want) // over TLS in TestRoundTrip, with the default handshake timeout
	waitRecords(t, m, len(want))
	if st := c.Stats(); st.ReadErrors != 0 || st.Records != uint64(len(want)) || st.HandshakeFailures != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestHandshakeFailed: a client without the certificate the collector
// requires is closed at once, counted as a failed handshake (not a
// timeout, not a read error).
func TestHandshakeFailed(t *testing.T) {
	srv, cli := tlsConfigs(t)
	c, _, stop := run(t, Config{Listen: []string{"tls://127.0.0.1:0"}, TLS: srv})
	defer stop()
	noCert := cli.Clone()
	noCert.Certificates = nil
	if k, err := tls.Dial("tcp", c.Addrs()[0].String(), noCert); err == nil { // TLS 1.3: the client may finish first
		k.SetReadDeadline(time.Now().Add(10 * time.Second))
		k.Read(make([]byte, 1))
		k.Close()
	}
	waitStats(t, c, "the failed handshake", func(st Stats) bool { return st.HandshakeFailures == 1 && st.ConnsOpen == 0 })
	if st := c.Stats(); st.HandshakeTimeouts != 0 || st.ReadErrors != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestSlowStream: a message sent a few bytes at a time, slower than the
// flush interval but within the idle timeout, decodes whole (a timeout in
// the middle of a message loses nothing).
func TestSlowStream(t *testing.T) {
	c, m, stop := run(t, Config{Listen: []string{"tcp://127.0.0.1:0"}, IdleConnTimeout: 2 * time.Second})
	defer stop()
	msgs := encodeMsgs(t, ipfix.Config{}, randRecords(5, 12))
	k := dialFrom(t, "127.0.0.1", c.Addrs()[0].String())
	defer k.Close()
	for _, b := range msgs {
		for len(b) > 0 {
			n := min(len(b), 97)
			if _, err := k.Write(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
			time.Sleep(30 * time.Millisecond) // FlushInterval is 20 ms
		}
	}
	waitRecords(t, m, 5)
	if st := c.Stats(); st.ConnsIdleClosed != 0 || st.ReadErrors != 0 || st.Records != 5 {
		t.Errorf("stats %+v", st)
	}
}

// TestSlowloris: one host holding connections open (sending a byte, then
// nothing) gets MaxConnsPerSource of them; the others are closed at once,
// counted, and an exporter on another address delivers every record.
func TestSlowloris(t *testing.T) {
	c, m, stop := run(t, Config{Listen: []string{"tcp://127.0.0.1:0"}, MaxConns: 64, MaxConnsPerSource: 8})
	defer stop()
	addr := c.Addrs()[0].String()
	var held []net.Conn
	defer func() {
		for _, k := range held {
			k.Close()
		}
	}()
	for range 200 {
		k := dialFrom(t, "127.0.0.2", addr)
		k.Write([]byte{0})
		held = append(held, k)
	}
	waitStats(t, c, "the slowloris connections to be sorted", func(st Stats) bool { return st.ConnsAccepted+st.ConnsRejectedPerSource == 200 })
	want := randRecords(326, 13)
	exportTo(t, "ipfix+tcp://"+addr, nil, want)
	waitRecords(t, m, len(want))
	if st := c.Stats(); st.ConnsAccepted != 8+1 || st.ConnsRejectedPerSource != 192 || st.ConnsRejected != 0 || st.Records != 326 {
		t.Errorf("stats %+v", st)
	}
}

// TestShutdownStuck: with 300 clients stuck in TLS handshakes and idle
// TCP connections (timeouts far away), Run returns within 2 s of its
// context's end, and no goroutine outlives it.
func TestShutdownStuck(t *testing.T) {
	srv, _ := tlsConfigs(t)
	baseline := runtime.NumGoroutine()
	c, err := New(Config{Listen: []string{"tls://127.0.0.1:0", "tcp://127.0.0.1:0"}, TLS: srv, MaxConnsPerSource: 1000,
		HandshakeTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx, &memSink{}); close(done) }()
	var clients []net.Conn
	defer func() {
		for _, k := range clients {
			k.Close()
		}
	}()
	for i := range 300 {
		k := dialFrom(t, "127.0.0.1", c.Addrs()[i%2].String())
		if i%4 == 0 {
			k.Write([]byte{0x16, 3, 1, 2, 0}) // a TLS record header (or, over TCP, an IPFIX header cut short)
		}
		clients = append(clients, k)
	}
	waitStats(t, c, "300 connections", func(st Stats) bool { return st.ConnsOpen == 300 })
	t0 := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return in 20 s")
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("Run returned %v after its context ended", d)
	}
	if st := c.Stats(); st.ConnsOpen != 0 || st.HandshakeTimeouts != 0 || st.HandshakeFailures != 0 {
		t.Errorf("stats %+v", st)
	}
	for _, k := range clients {
		k.Close()
	}
	waitFor(t, "the collector's goroutines to end", func() bool { return runtime.NumGoroutine() <= baseline })
}
