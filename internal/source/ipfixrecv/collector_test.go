package ipfixrecv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/ipfix"
	"github.com/weir-dev/weir/internal/metrics"
	ipfixsink "github.com/weir-dev/weir/internal/sink/ipfix"
	"github.com/weir-dev/weir/internal/testpki"
)

// memSink keeps what it is given.
type memSink struct {
	mu   sync.Mutex
	recs []flow.Record
}

func (m *memSink) Write(recs []flow.Record) error {
	m.mu.Lock()
	m.recs = append(m.recs, recs...)
	m.mu.Unlock()
	return nil
}

func (m *memSink) Close() error { return nil }

func (m *memSink) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.recs)
}

// randRecords makes n records with every exported field set: IPv4 and
// IPv6; TCP, UDP, ICMP and ICMPv6; both directions; every end reason a
// collector can tell apart; millisecond times (IPFIX's resolution); some
// translated (SNAT, DNAT, both), some denied.
func randRecords(n int, seed uint64) []flow.Record {
	r := rand.New(rand.NewPCG(seed, 1))
	reasons := []flow.EndReason{flow.ReasonIdle, flow.ReasonActive, flow.ReasonEnd, flow.ReasonFull, flow.ReasonShutdown}
	out := make([]flow.Record, n)
	t0 := time.Now().Add(-3 * time.Hour).UnixMilli() // within the collector's clock skew bound of a day
	for i := range out {
		rec := &out[i]
		if i%3 == 2 {
			rec.Key.IPVersion = 6
			var a, b [16]byte
			a[0], a[1], b[0], b[1] = 0x20, 0x01, 0xfd, 0x00
			for j := 2; j < 16; j++ {
				a[j], b[j] = byte(r.Uint32()), byte(r.Uint32())
			}
			rec.Key.SrcAddr, rec.Key.DstAddr = a, b
		} else {
			rec.Key.IPVersion = 4
			rec.Key.SrcAddr = netip.AddrFrom4([4]byte{10, byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())}).As16()
			rec.Key.DstAddr = netip.AddrFrom4([4]byte{192, 0, 2, byte(r.Uint32())}).As16()
		}
		switch i % 4 {
		case 0, 1:
			rec.Key.Proto = []uint8{flow.ProtoTCP, flow.ProtoUDP}[i%2]
			rec.Key.SrcPort, rec.Key.DstPort = uint16(1024+r.IntN(60000)), uint16(r.IntN(1024))
			if rec.Key.Proto == flow.ProtoTCP {
				rec.TCPFlags, rec.RevTCPFlags = uint8(r.Uint32()), uint8(r.Uint32())
			}
		default:
			rec.Key.Proto = flow.ProtoICMP
			if rec.Key.IPVersion == 6 {
				rec.Key.Proto = flow.ProtoICMPv6
			}
			rec.Key.ICMPType, rec.Key.ICMPCode = uint8(r.IntN(256)), uint8(r.IntN(16))
		}
		rec.Packets, rec.RevPackets = 1+r.Uint64N(1e6), r.Uint64N(1e6)
		rec.Bytes, rec.RevBytes = 40+r.Uint64N(1e12), r.Uint64N(1e12)
		rec.VLAN = uint16(r.IntN(4095))
		rec.Start = (t0 + r.Int64N(1e7)) * int64(time.Millisecond)
		rec.End = rec.Start + r.Int64N(1e7)*int64(time.Millisecond)
		rec.EndReason = reasons[i%len(reasons)]
		rec.Iface = fmt.Sprintf("eth%d", i%3)
		if i%5 == 1 { // translated (conntrack): source, destination or both
			p := rec.Key
			if i%3 != 0 {
				p.SrcAddr[15] ^= 0x55
			}
			if i%3 != 1 {
				p.DstAddr[15] ^= 0xaa
				if p.DstPort != 0 {
					p.DstPort = 8000 + uint16(i%1000)
				}
			}
			rec.PostNAT = p
		}
		if i%7 == 4 { // a deny flow (NFLOG)
			rec.Verdict = flow.VerdictDeny
		}
	}
	return out
}

// run starts a collector on listen with a memSink and returns it, its
// first address and a stop function.
func run(t *testing.T, cfg Config) (*Collector, *memSink, func()) {
	t.Helper()
	m := &memSink{}
	cfg.FlushInterval = 20 * time.Millisecond
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx, m); close(done) }()
	return c, m, func() { cancel(); <-done }
}

// waitRecords waits up to 10 s for n records.
func waitRecords(t *testing.T, m *memSink, n int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); m.len() < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("collected %d records of %d", m.len(), n)
		}
	}
}

func sortRecs(recs []flow.Record) {
	slices.SortFunc(recs, func(a, b flow.Record) int {
		if a.Start != b.Start {
			return int(a.Start - b.Start)
		}
		return slices.Compare(a.Key.SrcAddr[:], b.Key.SrcAddr[:])
	})
}

// TestRoundTrip: weir's exporter → weir's collector over UDP, TCP and TLS
// preserves every field of every record, IPv4 and IPv6.
func TestRoundTrip(t *testing.T) {
	pki := testpki.Write(t, t.TempDir())
	kp, err := tls.LoadX509KeyPair(pki.ServerCert, pki.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(pki.CA)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	srvTLS := &tls.Config{Certificates: []tls.Certificate{kp}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	cliTLS, err := ipfixsink.TLSConfig(pki.CA, pki.ClientCert, pki.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	for i, scheme := range []string{"udp", "tcp", "tls"} {
		t.Run(scheme, func(t *testing.T) {
			c, m, stop := run(t, Config{Listen: []string{scheme + "://127.0.0.1:0"}, Sockets: 2, TLS: srvTLS})
			defer stop()
			want := randRecords(3000, uint64(i))
			// Runs of records of two nodes and of none: the named ones
			// keep their node (observationDomainName), the others get
			// the exporter's address.
			for j := range want {
				want[j].Node = []string{"", "node-a", "ünï-node-b"}[j/50%3]
			}
			x, err := ipfixsink.New(ipfixsink.Config{URL: "ipfix+" + scheme + "://" + c.Addrs()[0].String(), TLS: cliTLS, Domain: 7})
			if err != nil {
				t.Fatal(err)
			}
			for j := 0; j < len(want); j += 100 {
				if err := x.Write(want[j : j+100]); err != nil {
					t.Fatal(err)
				}
			}
			x.Close()
			if st := x.Stats(); st.DroppedRecords != 0 {
				t.Fatalf("exporter dropped: %+v", st)
			}
			waitRecords(t, m, len(want))
			stop()
			got := slices.Clone(m.recs)
			for j := range want {
				if want[j].Node == "" {
					want[j].Node = "127.0.0.1"
				}
			}
			sortRecs(got)
			sortRecs(want)
			if len(got) != len(want) {
				t.Fatalf("%d records, want %d", len(got), len(want))
			}
			for j := range want {
				if got[j] != want[j] {
					t.Fatalf("record %d:\n got %+v\nwant %+v", j, got[j], want[j])
				}
			}
			st := c.Stats()
			if st.Records != uint64(len(want)) || st.SequenceGaps != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestHostile: garbage, truncated and unknown-template messages are
// counted by reason and never stop the collector; a good message after
// them still decodes.
func TestHostile(t *testing.T) {
	c, m, stop := run(t, Config{Listen: []string{"udp://127.0.0.1:0", "tcp://127.0.0.1:0"}, Sockets: 1})
	defer stop()
	u, err := net.Dial("udp", c.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	for _, msg := range [][]byte{
		{0, 10, 0, 16}, // short header
		{0, 11, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},                         // unknown version
		{0, 10, 0, 40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},                         // length past the datagram
		{0, 10, 0, 24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 8, 1, 2, 3, 4}, // data set, no template
	} {
		u.Write(msg)
	}
	// A TCP stream that is not IPFIX is closed, counted.
	tc, err := net.Dial("tcp", c.Addrs()[1].String())
	if err != nil {
		t.Fatal(err)
	}
	tc.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := tc.Read(make([]byte, 1)); err == nil {
		t.Error("the collector answered a non-IPFIX stream")
	}
	tc.Close()
	x, err := ipfixsink.New(ipfixsink.Config{URL: "ipfix+udp://" + c.Addrs()[0].String()})
	if err != nil {
		t.Fatal(err)
	}
	x.Write(randRecords(10, 9))
	x.Close()
	waitRecords(t, m, 10)
	time.Sleep(50 * time.Millisecond) // the next flush publishes the counters
	st := c.Stats()
	var errs uint64
	for _, n := range st.Errors {
		errs += n
	}
	if errs < 4 || st.Records != 10 {
		t.Errorf("stats %+v: want the 4 bad datagrams and the bad stream counted, 10 records", st)
	}
}

// TestLossByExporter: a lost message is a gap of its exporter's address
// and its records are counted lost, exactly, in Stats and in
// weir_collector_sequence_gaps_total and weir_collector_lost_records_total
// {exporter}; past MaxExporters, they count under "other".
func TestLossByExporter(t *testing.T) {
	c, m, stop := run(t, Config{Listen: []string{"udp://127.0.0.1:0"}, Sockets: 1, MaxExporters: 2})
	defer stop()
	var msgs [][]byte
	e, err := ipfix.NewEncoder(ipfix.Config{MTU: 576}, func(b []byte) error { msgs = append(msgs, slices.Clone(b)); return nil })
	if err != nil {
		t.Fatal(err)
	}
	recs := randRecords(200, 3)
	for i := range recs {
		// Plain records only: a lost message must not be one that
		// announces the NAT or deny templates.
		recs[i].PostNAT, recs[i].Verdict = flow.Key{}, flow.VerdictNone
		e.Add(&recs[i])
	}
	e.Flush()
	if len(msgs) < 10 {
		t.Fatalf("%d messages", len(msgs))
	}
	count := make([]uint64, len(msgs)) // records per message
	d := ipfix.NewDecoder(ipfix.DecoderConfig{})
	for i, b := range msgs {
		d.Decode(netip.MustParseAddrPort("127.0.0.1:1"), b, func(*flow.Record) { count[i]++ })
	}
	// 127.0.0.2 loses one message, 127.0.0.3 two apart, 127.0.0.4 one
	// (over the bound of two exporters), 127.0.0.5 none.
	lose := map[string][]int{"127.0.0.2": {4}, "127.0.0.3": {3, 7}, "127.0.0.4": {5}, "127.0.0.5": nil}
	for _, from := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		u, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(from)}, c.Addrs()[0].(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range msgs {
			if !slices.Contains(lose[from], i) {
				u.Write(b)
			}
		}
		u.Close()
		time.Sleep(20 * time.Millisecond) // in order: the bound takes the first two with gaps
	}
	waitRecords(t, m, 1)
	for end := time.Now().Add(10 * time.Second); c.Stats().SequenceGaps < 4 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	st := c.Stats()
	g := st.LossByExporter
	want := map[netip.Addr]ExporterLoss{
		netip.MustParseAddr("127.0.0.2"): {Gaps: 1, Records: count[4]},
		netip.MustParseAddr("127.0.0.3"): {Gaps: 2, Records: count[3] + count[7]},
		OtherExporter:                    {Gaps: 1, Records: count[5]},
	}
	if st.SequenceGaps != 4 || st.LostRecords != count[3]+count[4]+count[5]+count[7] || !maps.Equal(g, want) || st.SocketDrops != 0 {
		t.Fatalf("gaps %d, %d lost; by exporter %v, want %v", st.SequenceGaps, st.LostRecords, g, want)
	}
	reg := metrics.NewRegistry()
	if err := reg.Register(c.Collector()); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	reg.WriteTo(&out)
	for _, l := range []string{
		`weir_collector_sequence_gaps_total{exporter="127.0.0.2"} 1`,
		`weir_collector_sequence_gaps_total{exporter="127.0.0.3"} 2`,
		`weir_collector_sequence_gaps_total{exporter="other"} 1`,
		fmt.Sprintf(`weir_collector_lost_records_total{exporter="127.0.0.3"} %d`, count[3]+count[7]),
		fmt.Sprintf(`weir_collector_lost_records_total{exporter="other"} %d`, count[5]),
		`weir_collector_socket_drops_total 0`,
	} {
		if !strings.Contains(out.String(), l+"\n") {
			t.Errorf("metrics lack %s:\n%s", l, out.String())
		}
	}
}
