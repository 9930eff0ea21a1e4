package ipfix

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/ipfix"
	"github.com/weir-dev/weir/internal/testhost"
	"github.com/weir-dev/weir/internal/testpki"
)

// countRecords counts the flow records of the whole messages in b (weir's
// two plain templates, interface "eth0") and returns the octets they take.
func countRecords(b []byte) (records, used int) {
	for len(b)-used >= 16 {
		n := int(binary.BigEndian.Uint16(b[used+2:]))
		if n < 16 || used+n > len(b) {
			break
		}
		body := b[used+16 : used+n]
		for p := 0; p+4 <= len(body); {
			sid, sl := binary.BigEndian.Uint16(body[p:]), int(binary.BigEndian.Uint16(body[p+2:]))
			switch sid {
			case ipfix.TemplateIPv4:
				records += (sl - 4) / (70 + 5)
			case ipfix.TemplateIPv6:
				records += (sl - 4) / (94 + 5)
			}
			if sl < 4 {
				break
			}
			p += sl
		}
		used += n
	}
	return records, used
}

// TestUndeliveredDialRefused: with nobody listening every record counts as
// undelivered, dial_failed, and stderr says so once however many batches
// and attempts.
func TestUndeliveredDialRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var log testhost.SyncBuffer
	x, err := New(Config{URL: "ipfix+tcp://" + addr, MinBackoff: time.Nanosecond, MaxBackoff: time.Nanosecond, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	recs := records(500)
	for i := 0; i < 500; i += 100 {
		x.Write(recs[i : i+100])
	}
	x.Close()
	st := x.Stats()
	if st.Undelivered[ReasonDialFailed] != 500 || st.DroppedRecords != 500 || st.DialErrors < 5 || st.Connects != 0 {
		t.Errorf("stats %+v: want 500 records undelivered, dial_failed, after 5 or more failed dials", st)
	}
	if n := strings.Count(log.String(), "\n"); n != 1 || !strings.Contains(log.String(), "cannot connect") || !strings.Contains(log.String(), "dial_failed") {
		t.Errorf("stderr said %d lines, want one naming the cause:\n%s", n, log.String())
	}
}

// tlsCollector listens on loopback with the server certificate of pki,
// trusting client certificates signed by clientCA, at TLS versions up to
// maxVersion, and counts the records it receives.
func tlsCollector(t *testing.T, pki testpki.Files, clientCA string, maxVersion uint16) (net.Listener, *streamCollector) {
	t.Helper()
	kp, err := tls.LoadX509KeyPair(pki.ServerCert, pki.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(clientCA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{kp},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12, MaxVersion: maxVersion})
	if err != nil {
		t.Fatal(err)
	}
	c := collectStream(t, l)
	t.Cleanup(func() { c.stop(l) })
	return l, c
}

// TestUndeliveredTLS: a TLS export whose handshake fails, or whose session
// the collector refuses after it (TLS 1.3 rejects a client certificate
// only after the client's handshake is done), counts every record as
// undelivered, tls_handshake, and says so once; the collector receives
// none. The same exporter settings with trust both ways deliver all.
func TestUndeliveredTLS(t *testing.T) {
	pki := testpki.Write(t, t.TempDir())
	for _, c := range []struct {
		name           string
		serverTrusts   string // CA the collector checks client certificates against
		exporterTrusts string // CA the exporter checks the collector's certificate against
		maxVersion     uint16
		ok             bool
	}{
		{"trusted both ways", pki.CA, pki.CA, tls.VersionTLS13, true},
		{"exporter refuses collector", pki.CA, pki.OtherCA, tls.VersionTLS13, false},
		{"collector refuses client certificate TLS 1.3", pki.OtherCA, pki.CA, tls.VersionTLS13, false},
		{"collector refuses client certificate TLS 1.2", pki.OtherCA, pki.CA, tls.VersionTLS12, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, col := tlsCollector(t, pki, c.serverTrusts, c.maxVersion)
			cfg, err := TLSConfig(c.exporterTrusts, pki.ClientCert, pki.ClientKey)
			if err != nil {
				t.Fatal(err)
			}
			var log testhost.SyncBuffer
			// Confirm is long so that a loaded machine's slow collector
			// still refuses within it; a collector that accepts sends its
			// ticket at once.
			x, err := New(Config{URL: "ipfix+tls://" + l.Addr().String(), TLS: cfg, Log: &log, Confirm: 20 * time.Second,
				MinBackoff: time.Nanosecond, MaxBackoff: time.Nanosecond})
			if err != nil {
				t.Fatal(err)
			}
			recs := records(300)
			for i := 0; i < 300; i += 100 {
				x.Write(recs[i : i+100])
			}
			x.Close()
			st := x.Stats()
			if c.ok {
				waitFor(t, "300 records", func() bool { n, _ := col.received(); return n == 300 })
				if st.DroppedRecords != 0 || st.Connects != 1 || log.String() != "" {
					t.Errorf("stats %+v, stderr %q: want everything delivered on one connection", st, log.String())
				}
				return
			}
			if st.Undelivered[ReasonTLSHandshake] != 300 || st.DroppedRecords != 300 || st.Connects != 0 || st.DialErrors != 3 {
				t.Errorf("stats %+v: want the 300 records undelivered, tls_handshake, after 3 failed handshakes", st)
			}
			if n, _ := col.received(); n != 0 {
				t.Errorf("the collector received %d records", n)
			}
			if s := log.String(); strings.Count(s, "\n") != 1 || !strings.Contains(s, "TLS handshake failed") {
				t.Errorf("stderr %q: want one line naming the handshake", s)
			}
		})
	}
}

// stalledListener listens on loopback with a small receive buffer, so
// that a connection whose reader stops fills up after a few kilobytes.
func stalledListener(t *testing.T) net.Listener {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestUndeliveredBroken: a collector reads the first 100 records, then
// stops reading while the exporter writes 600 more, and the connection
// ends: the collector resets it, or the exporter stops. The records whose
// bytes the collector's kernel never acknowledged are counted undelivered
// (connection_lost or, if the stalled write timed out first,
// write_failed; shutdown when the exporter stopped), and they are exactly
// the records the collector did not get: total = read + acknowledged in
// its receive buffer + undelivered. The ones acknowledged but unread,
// which the collector's reset discards, are what TCP cannot show a sender
// (inflight.go).
func TestUndeliveredBroken(t *testing.T) {
	for _, how := range []string{"collector resets", "exporter stops"} {
		t.Run(how, func(t *testing.T) {
			l := stalledListener(t)
			accepted := make(chan *net.TCPConn, 1)
			go func() {
				if c, err := l.Accept(); err == nil {
					accepted <- c.(*net.TCPConn)
				}
			}()
			var log testhost.SyncBuffer
			x, err := New(Config{URL: "ipfix+tcp://" + l.Addr().String(), MinBackoff: time.Hour, WriteTimeout: 10 * time.Second,
				Linger: 200 * time.Millisecond, Log: &log})
			if err != nil {
				t.Fatal(err)
			}
			recs := records(700)
			x.Write(recs[:100])
			var conn *net.TCPConn
			select {
			case conn = <-accepted:
			case <-time.After(10 * time.Second):
				t.Fatal("no connection")
			}
			defer conn.Close()
			read := 0
			var buf []byte
			for read < 100 {
				b := make([]byte, 65536)
				conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				n, err := conn.Read(b)
				if err != nil {
					t.Fatalf("after %d records: %v", read, err)
				}
				buf = append(buf, b[:n]...)
				k, used := countRecords(buf)
				read += k
				buf = buf[used:]
			}
			// The collector stops reading.
			for i := 100; i < 700; i += 50 {
				x.Write(recs[i : i+50])
			}
			// Wait until its receive buffer stops filling (the window
			// closed): what it holds is acknowledged, the rest waits in
			// the exporter's kernel.
			rc, _ := conn.SyscallConn()
			inq := func() (n int) {
				rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
				return n
			}
			// Stable for a second: past the first zero-window probes, which
			// can still let a few bytes in when the receiver compacts its
			// queue.
			last, stable := -1, time.Now()
			for end := time.Now().Add(30 * time.Second); time.Since(stable) < time.Second; time.Sleep(20 * time.Millisecond) {
				if n := inq(); n != last {
					last, stable = n, time.Now()
				}
				if time.Now().After(end) {
					t.Fatal("the receive buffer kept changing")
				}
			}
			// What the collector's kernel holds is peeked at the last
			// moment, so bytes a late window probe let in count too: right
			// before the collector's reset, or after the exporter stopped
			// (and reset its side: the queued bytes stay readable).
			peek := make([]byte, 1<<20)
			var pn int
			peekQueued := func() {
				rc.Control(func(fd uintptr) { pn, _, _ = unix.Recvfrom(int(fd), peek, unix.MSG_PEEK|unix.MSG_DONTWAIT) })
			}
			var got uint64
			if how == "collector resets" {
				conn.SetLinger(0)
				peekQueued()
				conn.Close()
				waitFor(t, "the exporter to see the reset", func() bool { return x.tr.(*streamTransport).c.dead.Load() })
				x.Close()
				st := x.Stats()
				got = st.Undelivered[ReasonConnectionLost] + st.Undelivered[ReasonWriteFailed]
				if st.DroppedRecords != got {
					t.Errorf("stats %+v: undelivered for other reasons", st)
				}
			} else {
				x.Close() // the collector is still stalled
				peekQueued()
				st := x.Stats()
				got = st.Undelivered[ReasonShutdown]
				if st.DroppedRecords != got {
					t.Errorf("stats %+v: undelivered for other reasons", st)
				}
			}
			ackedUnread, _ := countRecords(append(buf, peek[:max(pn, 0)]...))
			want := uint64(700 - read - ackedUnread)
			if got != want || want == 0 || ackedUnread == 0 {
				t.Errorf("%d records undelivered; the collector read %d and its kernel acknowledged %d more of 700: want %d (and both parts > 0)",
					got, read, ackedUnread, want)
			}
			if !strings.Contains(log.String(), "counted as undelivered") || strings.Count(log.String(), "\n") != 1 {
				t.Errorf("stderr %q: want one line", log.String())
			}
			t.Logf("read %d, acknowledged unread %d, undelivered %d", read, ackedUnread, got)
		})
	}
}

// TestUndeliveredDrained: a collector that reads everything and then
// closes loses nothing the exporter had written. The next batch either
// goes into the dead connection (the exporter had not seen the close yet:
// it counts as connection_lost, whole) or, the close seen, reconnects at
// once and is delivered; the batch after it is delivered either way:
// received + undelivered = written, exactly, and stderr says what
// happened.
func TestUndeliveredDrained(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := collectStream(t, l)
	defer c.stop(l)
	var log testhost.SyncBuffer
	x, err := New(Config{URL: "ipfix+tcp://" + l.Addr().String(), MinBackoff: time.Hour, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	recs := records(300)
	x.Write(recs[:100])
	waitFor(t, "100 records", func() bool { n, _ := c.received(); return n == 100 })
	c.mu.Lock()
	c.conns[0].Close()
	c.mu.Unlock()
	x.Write(recs[100:200]) // into the dead connection, or a new one
	waitFor(t, "the exporter to see the close or be reconnected", func() bool {
		s := x.tr.(*streamTransport)
		return s.c == nil || s.c.dead.Load() || x.Stats().Connects == 2
	})
	x.Write(recs[200:300])
	x.Close()
	st := x.Stats()
	n := 0
	waitFor(t, "the last batch", func() bool { n, _ = c.received(); return n+int(st.DroppedRecords) == 300 })
	lost := st.Undelivered[ReasonConnectionLost]
	if (lost != 0 && lost != 100) || st.DroppedRecords != lost || st.Connects != 2 {
		t.Errorf("received %d, stats %+v: want the second batch delivered or connection_lost whole, and one reconnect", n, st)
	}
	if s := log.String(); lost == 100 && (!strings.Contains(s, "the collector closed the connection") || !strings.Contains(s, "connected after 1 failed attempts")) {
		t.Errorf("stderr %q", s)
	}
	t.Logf("second batch: %d undelivered", lost)
}

// TestUndeliveredTLSLate: a TLS 1.3 collector that takes longer than the
// exporter's Confirm to refuse the client's certificate: the exporter has
// written records by then, and the collector's kernel acknowledged them,
// but the collector never accepted the session: every one counts as
// undelivered, tls_handshake.
func TestUndeliveredTLSLate(t *testing.T) {
	pki := testpki.Write(t, t.TempDir())
	kp, err := tls.LoadX509KeyPair(pki.ServerCert, pki.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	refused := make(chan struct{})
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAnyClientCert,
		VerifyPeerCertificate: func([][]byte, [][]*x509.Certificate) error {
			<-refused // until the exporter has written
			return errors.New("not this client")
		}})
	if err != nil {
		t.Fatal(err)
	}
	c := collectStream(t, l)
	defer c.stop(l)
	cfg, err := TLSConfig(pki.CA, pki.ClientCert, pki.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	var log testhost.SyncBuffer
	x, err := New(Config{URL: "ipfix+tls://" + l.Addr().String(), TLS: cfg, Log: &log, Confirm: 50 * time.Millisecond, MinBackoff: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	recs := records(300)
	for i := 0; i < 300; i += 100 {
		x.Write(recs[i : i+100])
	}
	if st := x.Stats(); st.Connects != 1 || st.DroppedRecords != 0 {
		t.Fatalf("stats %+v: want the records written into an unconfirmed session", st)
	}
	close(refused)
	waitFor(t, "the exporter to see the refusal", func() bool { return x.tr.(*streamTransport).c.dead.Load() })
	x.Close()
	st := x.Stats()
	if st.Undelivered[ReasonTLSHandshake] != 300 || st.DroppedRecords != 300 {
		t.Errorf("stats %+v: want the 300 records undelivered, tls_handshake", st)
	}
	if n, _ := c.received(); n != 0 {
		t.Errorf("the collector received %d records", n)
	}
	if s := log.String(); !strings.Contains(s, "TLS handshake failed") || !strings.Contains(s, "not this client") && !strings.Contains(s, "bad certificate") {
		t.Errorf("stderr %q", s)
	}
}
