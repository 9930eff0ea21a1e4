package format

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

func TestTableTopAggregatesDeltas(t *testing.T) {
	big := rec("10.0.0.1", "10.0.0.2", 40000, 443, flow.ProtoTCP)
	big.EndReason = flow.ReasonActive
	big2 := big
	big2.Start, big2.End = big.End+1, big.End+10
	big2.EndReason = flow.ReasonEnd
	small := rec("10.0.0.3", "10.0.0.4", 5000, 53, flow.ProtoUDP)
	small.Bytes, small.RevBytes = 10, 10

	var buf bytes.Buffer
	tb := NewTable(&buf, 5)
	if err := tb.Write([]flow.Record{small, big}); err != nil {
		t.Fatal(err)
	}
	if err := tb.Write([]flow.Record{big2}); err != nil {
		t.Fatal(err)
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("want header, 2 rows, blank, summary; got:\n%s", out)
	}
	if !strings.Contains(lines[1], "10.0.0.1:40000") || !strings.Contains(lines[2], "10.0.0.3:5000") {
		t.Errorf("rows not ordered by bytes:\n%s", out)
	}
	// big: 2 records of 3+2 packets and 180+3000 bytes each.
	for _, want := range []string{"6 ", "360 B", "4 ", "5.86 KiB", "end", "eth0"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("top row lacks %q: %s", want, lines[1])
		}
	}
	if !strings.Contains(out, "2 flows (3 records)") || !strings.Contains(out, "total 15 packets, 6.23 KiB") {
		t.Errorf("summary wrong:\n%s", out)
	}
}

func TestTableStreaming(t *testing.T) {
	var buf bytes.Buffer
	tb := NewTable(&buf, 0)
	r := rec("2001:db8::1", "2001:db8::2", 1, 2, flow.ProtoUDP)
	if err := tb.Write([]flow.Record{r, r}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "PROTO") || !strings.Contains(lines[1], "[2001:db8::1]:1") {
		t.Fatalf("streaming table:\n%s", buf.String())
	}
}

func TestFormatters(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{Bytes(0), "0 B"}, {Bytes(1023), "1023 B"}, {Bytes(1024), "1.00 KiB"}, {Bytes(1536), "1.50 KiB"},
		{Bytes(10 << 20), "10.0 MiB"}, {Bytes(500 << 30), "500 GiB"},
		{Count(0), "0"}, {Count(999), "999"}, {Count(1000), "1,000"}, {Count(1234567), "1,234,567"},
		{Flags(0), "-"}, {Flags(flow.TCPSyn | flow.TCPAck), "S."}, {Flags(0xff), "FSRP.UEW"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestWriteFlows: the live view prints the title, a header and one row per
// flow in the order given; an empty view says so.
func TestWriteFlows(t *testing.T) {
	a := rec("10.0.0.1", "10.0.0.2", 40000, 443, flow.ProtoTCP)
	b := rec("10.0.0.3", "10.0.0.4", 5000, 53, flow.ProtoUDP)
	var buf bytes.Buffer
	if err := WriteFlows(&buf, "now: 2 flows", []flow.Record{a, b}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 4 || lines[0] != "now: 2 flows" || !strings.HasPrefix(lines[1], "PROTO") ||
		!strings.Contains(lines[2], "10.0.0.1:40000") || !strings.Contains(lines[3], "10.0.0.3:5000") {
		t.Fatalf("live view:\n%s", buf.String())
	}
	buf.Reset()
	if err := WriteFlows(&buf, "empty", nil); err != nil || buf.String() != "empty\n(no live flows)\n" {
		t.Fatalf("empty view %q (%v)", buf.String(), err)
	}
}

// TestTableNATAndVerdict: a translated endpoint shows its post-NAT
// address and port after an arrow (only the side NAT changed), a deny
// flow's reason its verdict and rule; other rows are unchanged.
func TestTableNATAndVerdict(t *testing.T) {
	dnat := natRec("10.0.0.1", "10.96.0.10", "10.0.0.1", "10.244.1.5")
	dnat.PostNAT.SrcPort = dnat.Key.SrcPort // DNAT only: the source stays
	deny := rec("2001:db8::1", "2001:db8::2", 5000, 22, flow.ProtoTCP)
	deny.EndReason, deny.Verdict, deny.Rule = flow.ReasonIdle, flow.VerdictDeny, "weir-deny"
	plain := rec("10.0.0.3", "10.0.0.4", 1, 2, flow.ProtoUDP)
	var buf bytes.Buffer
	if err := NewTable(&buf, 0).Write([]flow.Record{dnat, deny, plain}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[1], "10.0.0.1:40000  ") || strings.Contains(lines[1], "10.0.0.1:40000 →") ||
		!strings.Contains(lines[1], "10.96.0.10:443 → 10.244.1.5:8443") ||
		!strings.Contains(lines[2], "idle, deny weir-deny") || strings.Contains(lines[3], "→") || strings.Contains(lines[3], "deny") {
		t.Fatalf("table:\n%s", buf.String())
	}
}

// TestTableEnrichment: a known workload follows its endpoint in
// parentheses, the service the destination; a record without them is
// printed as before.
func TestTableEnrichment(t *testing.T) {
	r := rec("10.0.0.1", "10.96.0.10", 40000, 443, flow.ProtoTCP)
	r.SrcWorkload = &flow.Workload{Name: "web-1", Namespace: "shop", Node: "n1"}
	r.DstWorkload = &flow.Workload{Name: "lb-host"}
	r.Service, r.ServiceMatch = &flow.Service{Name: "shop/cart", Backends: "10.244.1.5:8443"}, flow.ServiceMatchVIP
	plain := rec("10.0.0.3", "10.0.0.4", 1, 2, flow.ProtoUDP)
	var buf bytes.Buffer
	if err := NewTable(&buf, 0).Write([]flow.Record{r, plain}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "10.0.0.1:40000 (shop/web-1)  ") ||
		!strings.Contains(lines[1], "10.96.0.10:443 (lb-host) [shop/cart vip]") ||
		strings.Contains(lines[2], "(") || strings.Contains(lines[2], "[") {
		t.Fatalf("table:\n%s", buf.String())
	}
}

func TestInt(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", -1000: "-1,000", 100000: "100,000",
		-1234567: "-1,234,567", math.MaxInt64: "9,223,372,036,854,775,807", math.MinInt64: "-9,223,372,036,854,775,808"} {
		if got := Int(n); got != want {
			t.Errorf("Int(%d) = %q, want %q", n, got, want)
		}
	}
}
