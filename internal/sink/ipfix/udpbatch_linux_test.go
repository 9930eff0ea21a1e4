package ipfix

import (
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/ipfix"
)

// TestUDPBatchInOrder: bursts of records exported unpaced over loopback
// reach the receiver as one IPFIX message per datagram, every message, in
// order: the decoder sees every record, no sequence gap, no late message.
// Equal-sized messages (IPv4 only) leave as UDP_SEGMENT runs, a few
// system calls a burst; mixed sizes, and the fallback without
// segmentation, as one datagram each, still one sendmmsg a burst.
func TestUDPBatchInOrder(t *testing.T) {
	for _, tc := range []struct {
		name       string
		v4, noGSO  bool
		wantGSO    bool
		recs, each int
	}{
		{"gso/ipv4", true, false, true, 20000, 1000},
		{"gso/mixed", false, false, false, 20000, 1000},
		{"fallback/ipv4", true, true, false, 20000, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			l.SetReadBuffer(4 << 20)
			x, err := New(Config{URL: "ipfix+udp://" + l.LocalAddr().String(), Rate: -1})
			if err != nil {
				t.Fatal(err)
			}
			u := x.tr.(*udpTransport)
			u.batch.sys.noGSO = tc.noGSO
			var recs []flow.Record
			for i, r := range records(2 * tc.recs) {
				if len(recs) < tc.recs && (!tc.v4 || i%4 != 3) {
					recs = append(recs, r)
				}
			}
			dec := ipfix.NewDecoder(ipfix.DecoderConfig{})
			buf := make([]byte, 65536)
			got, msgs := 0, uint64(0)
			// Each burst is read before the next is sent: the receiver's
			// buffer never overflows, so every loss would be the sender's.
			for i := 0; i < len(recs); i += tc.each {
				if err := x.Write(recs[i:min(i+tc.each, len(recs))]); err != nil {
					t.Fatal(err)
				}
				for msgs < x.Stats().Messages {
					l.SetReadDeadline(time.Now().Add(10 * time.Second))
					n, from, err := l.ReadFromUDPAddrPort(buf)
					if errors.Is(err, os.ErrDeadlineExceeded) {
						t.Fatalf("%d of %d messages after 10 s", msgs, x.Stats().Messages)
					}
					if err != nil {
						t.Fatal(err)
					}
					if err := dec.Decode(from, buf[:n], func(*flow.Record) { got++ }); err != nil {
						t.Fatalf("message %d: %v", msgs, err)
					}
					msgs++
				}
			}
			x.Close()
			st, ds := x.Stats(), dec.Stats()
			if st.Records != uint64(tc.recs) || st.SendErrors != 0 || st.DroppedRecords != 0 || got != tc.recs {
				t.Errorf("exporter %+v; received %d records, want %d", st, got, tc.recs)
			}
			if ds.Messages[2] != st.Messages || ds.SequenceGaps != 0 || ds.SeqReorders != 0 || ds.LostRecords != 0 {
				t.Errorf("decoder: %d of %d messages, %d gaps, %d late, %d lost", ds.Messages[2], st.Messages, ds.SequenceGaps, ds.SeqReorders, ds.LostRecords)
			}
			bursts := uint64((tc.recs + tc.each - 1) / tc.each)
			s := &u.batch.sys
			t.Logf("%d messages, %d system calls, %d UDP_SEGMENT datagrams", st.Messages, u.batch.calls, s.runs)
			if u.batch.calls > 2*bursts {
				t.Errorf("%d system calls for %d bursts of %d messages", u.batch.calls, bursts, st.Messages/bursts)
			}
			if tc.wantGSO && (s.noGSO || s.runs < bursts) {
				t.Errorf("segmentation off (%v) or %d runs for %d bursts: want one run at least per burst", s.noGSO, s.runs, bursts)
			}
			if tc.noGSO && s.runs != 0 {
				t.Errorf("%d UDP_SEGMENT datagrams with segmentation off", s.runs)
			}
		})
	}
}

// TestUDPBatchPlan: runs are equal-sized messages, the last may be
// shorter, never longer; at most gsoSegments and gsoBytes each.
func TestUDPBatchPlan(t *testing.T) {
	b := newUDPBatch(nil, 1000)
	for _, n := range []int{100, 100, 100, 50, 100, 200, 200, 300} {
		b.add(make([]byte, n), 1)
	}
	b.plan(0)
	if got, want := fmt.Sprint(b.sys.ents), "[{0 4 100} {4 5 0} {5 7 200} {7 8 0}]"; got != want {
		t.Errorf("plan %s, want %s", got, want)
	}
	b.reset()
	for range 3 * gsoSegments {
		b.add(make([]byte, 1000), 1)
	}
	b.plan(0)
	if got, want := fmt.Sprint(b.sys.ents), "[{0 64 1000} {64 128 1000} {128 192 1000}]"; got != want {
		t.Errorf("plan %s, want %s", got, want)
	}
	b.reset()
	for range 3 {
		b.add(make([]byte, 30000), 1)
	}
	b.plan(0)
	if got, want := fmt.Sprint(b.sys.ents), "[{0 2 30000} {2 3 0}]"; got != want {
		t.Errorf("plan %s, want %s (at most %d bytes a run)", got, want, gsoBytes)
	}
	b.sys.noGSO = true
	b.plan(1)
	if got, want := fmt.Sprint(b.sys.ents), "[{1 2 0} {2 3 0}]"; got != want {
		t.Errorf("plan without segmentation from 1: %s, want %s", got, want)
	}
}
