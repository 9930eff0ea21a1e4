package nflog

import (
	"bytes"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/metrics"
)

// TestPrefixCutShown: log prefixes longer than MaxPrefixLen (nftables
// allows 127 bytes) are cut, and the cuts are counted per group in the
// metric weir_nflog_prefix_cuts_total and in the --stats line; a prefix
// of exactly MaxPrefixLen bytes is not a cut.
func TestPrefixCutShown(t *testing.T) {
	agg := NewAggregator(AggregatorConfig{}, func(*DenyFlow) {})
	long := strings.Repeat("x", 127)
	for i, prefix := range []string{long, strings.Repeat("y", MaxPrefixLen), long[:MaxPrefixLen+1], "short"} {
		if err := agg.Message(full(prefix, udp4(a4, b4, uint16(1000+i), 7777, 100, 100)), 1); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if agg.Stats.PrefixCut != 2 {
		t.Fatalf("%d prefixes cut, want 2", agg.Stats.PrefixCut)
	}
	groups := []GroupStats{{Group: 5, Aggregator: agg.Stats}, {Group: 6}}

	reg := metrics.NewRegistry()
	if err := reg.Register(&collector{stats: func() []GroupStats { return groups }}); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	reg.WriteTo(&out)
	for _, l := range []string{`weir_nflog_prefix_cuts_total{group="5"} 2`, `weir_nflog_prefix_cuts_total{group="6"} 0`} {
		if !strings.Contains(out.String(), l+"\n") {
			t.Errorf("metrics lack %s:\n%s", l, out.String())
		}
	}

	var stats bytes.Buffer
	writeStats(&stats, groups)
	want := "nflog       group 5: 4 packets in 0 deny-flow records, 0 rejected, 0 lost (gaps 0, overruns 0), 2 prefixes cut to 64 bytes\n" +
		"nflog       group 6: 0 packets in 0 deny-flow records, 0 rejected, 0 lost (gaps 0, overruns 0), 0 prefixes cut to 64 bytes\n"
	if stats.String() != want {
		t.Errorf("--stats:\n%s\nwant\n%s", stats.String(), want)
	}
}
