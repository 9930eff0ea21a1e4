package gendb

import (
	"bytes"
	"encoding/csv"
	"net/netip"
	"strconv"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// TestCSVRoundTrip writes generated records (both families, ICMP, two
// interfaces) as CSV and reads them back with encoding/csv: one header,
// one line per record, every column equal to the record's field.
func TestCSVRoundTrip(t *testing.T) {
	c := Config{Days: 1, BlocksPerDay: 3, FlowsPerBlock: 400, IPv6Share: 0.3, Ifaces: []string{"eth0", "wg0"}}
	var buf bytes.Buffer
	w := NewCSV(&buf)
	recs := collect(t, c)
	for i := 0; i < len(recs); i += 400 {
		if err := w.Write(recs[i : i+400]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	lines, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(recs)+1 || len(lines[0]) != len(CSVHeader) || lines[0][0] != "src_ip" {
		t.Fatalf("%d lines, header %v; want %d records", len(lines), lines[0], len(recs))
	}
	addr := func(a [16]byte, ver uint8) string {
		ip := netip.AddrFrom16(a)
		if ver == 4 {
			ip = ip.Unmap()
		}
		return ip.String()
	}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	var v6 int
	for i, r := range recs {
		want := []string{addr(r.Key.SrcAddr, r.Key.IPVersion), addr(r.Key.DstAddr, r.Key.IPVersion),
			u(uint64(r.Key.SrcPort)), u(uint64(r.Key.DstPort)), u(uint64(r.Key.Proto)), u(uint64(r.Key.ICMPType)),
			u(r.Packets), u(r.Bytes), u(r.RevPackets), u(r.RevBytes), u(uint64(r.TCPFlags)), u(uint64(r.RevTCPFlags)),
			strconv.FormatInt(r.Start, 10), strconv.FormatInt(r.End, 10), u(uint64(r.EndReason)), r.Iface}
		for j := range want {
			if lines[i+1][j] != want[j] {
				t.Fatalf("record %d column %s: %q, want %q", i, CSVHeader[j], lines[i+1][j], want[j])
			}
		}
		if r.Key.IPVersion == 6 {
			v6++
		}
	}
	if v6 == 0 {
		t.Fatal("no IPv6 record generated: the test checks less than it says")
	}
}

// TestCSVRefusesIface: an interface name that would break a CSV line is
// an error, not a malformed file.
func TestCSVRefusesIface(t *testing.T) {
	w := NewCSV(&bytes.Buffer{})
	if err := w.Write([]flow.Record{{Iface: "a,b"}}); err == nil {
		t.Fatal("a comma in an interface name was written")
	}
	if err := w.Flush(); err == nil {
		t.Fatal("Flush after a refused record reported no error")
	}
}
