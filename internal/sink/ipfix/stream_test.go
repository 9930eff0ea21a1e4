package ipfix

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/ipfix"
	"github.com/weir-dev/weir/internal/testpki"
)

// streamMsg is what the test collector saw of one message.
type streamMsg struct {
	conn    int    // accepted connection, from 0
	seq     uint32 // header sequence number
	records int    // data records
	tmpl    bool   // carries the template set
}

// streamCollector accepts connections on l and frames their messages.
type streamCollector struct {
	mu    sync.Mutex
	msgs  []streamMsg
	conns []net.Conn
	wg    sync.WaitGroup
}

func collectStream(t *testing.T, l net.Listener) *streamCollector {
	c := &streamCollector{}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for i := 0; ; i++ {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.mu.Lock()
			c.conns = append(c.conns, conn)
			c.mu.Unlock()
			c.wg.Add(1)
			go func() { defer c.wg.Done(); c.read(t, i, conn) }()
		}
	}()
	return c
}

// read frames messages by their length field and counts the records of
// weir's two templates (all test records name the interface "eth0").
func (c *streamCollector) read(t *testing.T, id int, conn net.Conn) {
	hdr := make([]byte, 16)
	for {
		if _, err := io.ReadFull(conn, hdr); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(hdr[2:]))
		if binary.BigEndian.Uint16(hdr) != ipfix.Version || n < 16 {
			t.Errorf("conn %d: bad message header %x", id, hdr)
			return
		}
		body := make([]byte, n-16)
		if _, err := io.ReadFull(conn, body); err != nil {
			t.Errorf("conn %d: message cut short: %v", id, err)
			return
		}
		m := streamMsg{conn: id, seq: binary.BigEndian.Uint32(hdr[8:])}
		for p := 0; p+4 <= len(body); {
			sid, sl := binary.BigEndian.Uint16(body[p:]), int(binary.BigEndian.Uint16(body[p+2:]))
			switch sid {
			case 2:
				m.tmpl = true
			case ipfix.TemplateIPv4:
				m.records += (sl - 4) / (70 + 5)
			case ipfix.TemplateIPv6:
				m.records += (sl - 4) / (94 + 5)
			}
			p += sl
		}
		c.mu.Lock()
		c.msgs = append(c.msgs, m)
		c.mu.Unlock()
	}
}

// stop closes the listener and every connection (so that a test that
// failed before its exporter closed does not wait for it) and waits for
// the readers.
func (c *streamCollector) stop(l net.Listener) {
	l.Close()
	c.mu.Lock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// received returns the records seen so far and the messages.
func (c *streamCollector) received() (int, []streamMsg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.msgs {
		n += m.records
	}
	return n, append([]streamMsg(nil), c.msgs...)
}

// waitFor polls cond every 5 ms for at most 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestTCPReconnect: records go over one TCP connection; when the
// collector closes it, the exporter notices before writing, reconnects
// after its backoff, starts the new session with templates and sequence
// 0, and loses nothing.
func TestTCPReconnect(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := collectStream(t, l)
	defer c.stop(l)
	x, err := New(Config{URL: "ipfix+tcp://" + l.Addr().String(), MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	recs := records(1000)
	for i := 0; i < 500; i += 50 {
		x.Write(recs[i : i+50])
	}
	waitFor(t, "500 records", func() bool { n, _ := c.received(); return n == 500 })
	c.mu.Lock()
	c.conns[0].Close()
	c.mu.Unlock()
	waitFor(t, "the exporter to see the close", func() bool { return x.tr.(*streamTransport).c.dead.Load() })
	for i := 500; i < 1000; i += 50 {
		x.Write(recs[i : i+50])
		time.Sleep(2 * time.Millisecond) // past the backoff: the second batch reconnects
	}
	x.Close()
	st := x.Stats()
	n, msgs := 0, []streamMsg(nil)
	waitFor(t, "the records after the reconnect", func() bool { n, msgs = c.received(); return n == 1000-int(st.DroppedRecords) })
	if st.Connects != 2 || st.Records != 1000 || st.DroppedRecords > 50 {
		t.Errorf("stats %+v: want 2 connects, at most the first batch after the close dropped", st)
	}
	next := map[int]uint32{}
	for i, m := range msgs {
		if first := i == 0 || msgs[i-1].conn != m.conn; m.tmpl != first {
			t.Errorf("message %d (conn %d): templates %v, want them in each connection's first message only", i, m.conn, m.tmpl)
		}
		if m.seq != next[m.conn] {
			t.Errorf("message %d (conn %d): sequence %d, want %d", i, m.conn, m.seq, next[m.conn])
		}
		next[m.conn] = m.seq + uint32(m.records)
	}
	if len(next) != 2 {
		t.Errorf("messages came on %d connections, want 2", len(next))
	}
}

// TestTCPStalled: a collector that accepts but never reads makes writes
// time out; the exporter drops and counts instead of blocking for ever.
func TestTCPStalled(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held := make(chan net.Conn, 4)
	defer func() {
		l.Close()
		for len(held) > 0 {
			(<-held).Close()
		}
	}()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held <- c // never read
		}
	}()
	x, err := New(Config{URL: "ipfix+tcp://" + l.Addr().String(), WriteTimeout: 100 * time.Millisecond, MinBackoff: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	recs := records(1000)
	start := time.Now()
	// Socket buffers hold a few MB; 200 batches of 1,000 records (~16 MB)
	// cannot fit, so a write must time out.
	for i := 0; i < 200 && x.Stats().SendErrors == 0; i++ {
		x.Write(recs)
	}
	st := x.Stats()
	if st.SendErrors != 1 || st.DroppedRecords == 0 || st.Connected {
		t.Errorf("stats %+v: want one timed-out write, drops counted, disconnected", st)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
	// Until the (hour-long) backoff passes, batches are dropped at once.
	before := st.DroppedRecords
	x.Write(recs[:10])
	if st := x.Stats(); st.DroppedRecords != before+10 || st.Connects != 1 {
		t.Errorf("after the timeout: %+v, want the 10 records dropped without a reconnect", st)
	}
}

// TestTLS: export over mutual TLS to a collector whose certificate the
// given CA signed delivers every record; with another CA the handshake
// fails and the records are counted as dropped.
func TestTLS(t *testing.T) {
	pki := testpki.Write(t, t.TempDir())
	caFile, cliCert, cliKey, otherCA := pki.CA, pki.ClientCert, pki.ClientKey, pki.OtherCA
	kp, err := tls.LoadX509KeyPair(pki.ServerCert, pki.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(caFile)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{kp},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	c := collectStream(t, l)
	defer c.stop(l)

	cfg, err := TLSConfig(caFile, cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	x, err := New(Config{URL: "ipfix+tls://" + l.Addr().String(), TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	recs := records(2000)
	for i := 0; i < len(recs); i += 100 {
		x.Write(recs[i : i+100])
	}
	x.Close()
	waitFor(t, "2,000 records over TLS", func() bool { n, _ := c.received(); return n == 2000 })
	if st := x.Stats(); st.Connects != 1 || st.DroppedRecords != 0 || st.Records != 2000 {
		t.Errorf("stats %+v", st)
	}

	cfg, err = TLSConfig(otherCA, cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	x, err = New(Config{URL: "ipfix+tls://" + l.Addr().String(), TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	x.Write(recs[:100])
	x.Close()
	if st := x.Stats(); st.Connects != 0 || st.DialErrors != 1 || st.DroppedRecords != 100 {
		t.Errorf("untrusted collector: stats %+v, want a failed dial and 100 records dropped", st)
	}
	if _, err := TLSConfig(caFile, cliCert, ""); err == nil {
		t.Error("a certificate without its key was accepted")
	}
}
