package ipfix

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/ipfix"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/sink"
)

func TestURL(t *testing.T) {
	for _, u := range []string{"udp://127.0.0.1:4739", "ipfix+sctp://127.0.0.1:4739", "ipfix+tcp://127.0.0.1:4739?x=1", "ipfix+udp://127.0.0.1:4739?mtu=0", "ipfix+udp://127.0.0.1", "ipfix+udp://127.0.0.1:4739/x", "ipfix+udp://", "::",
		"ipfix+udp://127.0.0.1:4739?biflow=no", "ipfix+udp://127.0.0.1:4739?sets=2", "ipfix+udp://127.0.0.1:4739?mtu=1400&mtu=9000"} {
		if _, err := New(Config{URL: u}); !errors.Is(err, ErrScheme) {
			t.Errorf("%q: %v, want ErrScheme", u, err)
		}
	}
	if x, err := New(Config{URL: "ipfix+udp://127.0.0.1:4739?mtu=9000"}); err != nil || x.cfg.MTU != 9000 {
		t.Errorf("?mtu=9000: %v", err)
	}
	if d, err := ParseURL("ipfix+tls://collector.example:4740?biflow=off&sets=one&mtu=9000"); err != nil ||
		d != (Dest{Network: "tls", Host: "collector.example:4740", MTU: 9000, Unidirectional: true, OneSet: true}) {
		t.Errorf("options: %+v, %v", d, err)
	}
	if d, err := ParseURL("ipfix+tcp://127.0.0.1:4739?biflow=on&sets=many"); err != nil || d.Unidirectional || d.OneSet {
		t.Errorf("defaults spelt out: %+v, %v", d, err)
	}
	if _, err := New(Config{URL: "ipfix+udp://127.0.0.1:4739", MTU: MaxUDPMTU + 1}); !errors.Is(err, ipfix.ErrBadConfig) {
		t.Errorf("UDP with an MTU over a datagram: %v, want ErrBadConfig", err)
	}
}

// TestPacing: at 1,000 messages/s, every message after an initial burst
// of 10 waits its millisecond (on a virtual clock); unpaced, none waits.
func TestPacing(t *testing.T) {
	l, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, rate := range []float64{1000, -1} {
		x, err := New(Config{URL: "ipfix+udp://" + l.LocalAddr().String(), Rate: rate})
		if err != nil {
			t.Fatal(err)
		}
		var slept time.Duration
		x.sleep = func(d time.Duration) { slept += d } // virtual time: the clock below advances by what was slept
		x.now = func() time.Time { return time.Unix(0, 0).Add(slept) }
		recs := records(2000)
		for i := 0; i < len(recs); i += 20 {
			if err := x.Write(recs[i : i+20]); err != nil {
				t.Fatal(err)
			}
		}
		x.Close()
		st := x.Stats()
		if st.Records != 2000 || st.Messages < 100 || st.SendErrors != 0 {
			t.Fatalf("rate %v: %+v", rate, st)
		}
		want := time.Duration(0)
		if rate > 0 {
			want = time.Duration(st.Messages-10) * time.Millisecond
		}
		if d := slept - want; d < -2*time.Millisecond || d > 2*time.Millisecond {
			t.Errorf("rate %v: %d messages slept %v, want %v", rate, st.Messages, slept, want)
		}
	}
}

// TestDroppedSampled: records lost with a stream collector down count as
// dropped one for one; the sampling options records that go with them
// (counted by IPFIX sequence numbers) do not.
func TestDroppedSampled(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nobody listens: every dial is refused
	x, err := New(Config{URL: "ipfix+tcp://" + addr, MinBackoff: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	recs := records(10)
	for i := range recs {
		recs[i].Sampling = []uint32{4, 100}[i%2]
	}
	if err := x.Write(recs); err != nil {
		t.Fatal(err)
	}
	if st := x.Stats(); st.DroppedRecords != 10 || st.Messages != 0 || st.Connected {
		t.Errorf("stats %+v: want the 10 records dropped", st)
	}
}

// TestQueueFull: records the destination's queue dropped (its exporter
// held up, here by its pace) count as undelivered, queue_full, in Stats
// and in the metrics, beside what the exporter itself lost.
func TestQueueFull(t *testing.T) {
	l, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	x, err := New(Config{URL: "ipfix+udp://" + l.LocalAddr().String(), Rate: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	x.sleep = func(time.Duration) { <-release } // the 11th message waits for the test
	q := sink.NewQueue("export", x, 1, 1024)
	x.CountQueue(q)
	q.Write(records(1000)) // ~50 messages: held at the 11th
	for i := 0; i < 10; i++ {
		q.Write(records(100)) // the queue's only buffer is taken: dropped
	}
	close(release)
	q.Close()
	st, qs := x.Stats(), q.Stats()
	if qs.Dropped != 1000 || st.Undelivered[ReasonQueueFull] != 1000 || st.DroppedRecords != 1000 || st.Records != 1000 {
		t.Errorf("queue %+v, exporter %+v: want the 1,000 records the queue dropped counted as queue_full", qs, st)
	}
	var b bytes.Buffer
	reg := metrics.NewRegistry()
	if err := reg.Register(Collector(x)); err != nil {
		t.Fatal(err)
	}
	reg.WriteTo(&b)
	if want := `weir_export_undelivered_records_total{destination="` + x.URL() + `",reason="queue_full"} 1000`; !strings.Contains(b.String(), want) {
		t.Errorf("metrics lack %s:\n%s", want, b.String())
	}
}
