package calibrate

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseIperf3(t *testing.T) {
	out, err := os.ReadFile("testdata/iperf3.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseIperf3(out)
	if err != nil {
		t.Fatal(err)
	}
	// The figures of the captured run (end.sum_received, end.sum_sent).
	if r.BitsPerSec < 1e8 || r.BitsPerSec > 1e12 {
		t.Errorf("bits/s %v", r.BitsPerSec)
	}
	for _, bad := range []string{`{"error": "unable to connect to server"}`, `{"end": {}}`, `not json`} {
		if _, err := ParseIperf3([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func TestParseSockperf(t *testing.T) {
	out, err := os.ReadFile("testdata/sockperf-udp.txt")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseSockperf(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.AvgRTT != 84277*time.Nanosecond || r.P50RTT != 81173*time.Nanosecond || r.P99RTT != 176615*time.Nanosecond {
		t.Errorf("%+v", r)
	}
	noP99 := strings.ReplaceAll(string(out), "percentile 99.000", "percentile 98.000")
	if _, err := ParseSockperf([]byte(noP99)); err == nil {
		t.Error("no 99th percentile: accepted")
	}
	oneWay := strings.ReplaceAll(string(out), "avg-rtt=", "avg-lat=")
	if _, err := ParseSockperf([]byte(oneWay)); err == nil || !strings.Contains(err.Error(), "one-way") {
		t.Errorf("one-way output: %v", err)
	}
}
