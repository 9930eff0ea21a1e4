package ipfixrecv

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/ipfix"
)

// TestExporterNames: each of the first max exporters introduces at most
// perExporter names (names it shares with others count for it too);
// exporters past max are bound only by the names in all; losses past
// max count under OtherExporter.
func TestExporterNames(t *testing.T) {
	var e exporters
	e.init(2, 10, 3)
	a, b, c := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	admit := func(x netip.Addr, name string, want string, why nameRefusal) {
		t.Helper()
		if got, w := e.admit(x, name); got != want || w != why {
			t.Errorf("%v %q: %q (%d), want %q (%d)", x, name, got, w, want, why)
		}
	}
	for i := range 3 {
		admit(a, fmt.Sprint("a", i), fmt.Sprint("a", i), nameOK)
	}
	admit(a, "a0", "a0", nameOK)
	admit(a, "a3", flow.OtherIface, namePerExporter)
	admit(a, flow.OtherIface, flow.OtherIface, nameOK)
	admit(b, "a0", "a0", nameOK) // known, but new for b
	admit(b, "b1", "b1", nameOK)
	for i := range 6 { // c is past the two exporters: only the 10 names in all bind it
		admit(c, fmt.Sprint("c", i), fmt.Sprint("c", i), nameOK)
	}
	admit(c, "c6", flow.OtherIface, nameGlobal)
	admit(b, "b2", flow.OtherIface, nameGlobal)
	e.gap(c, ipfix.Loss{Records: 7})
	e.gap(a, ipfix.Loss{Records: 2})
	loss, _, _ := e.stats()
	if len(loss) != 2 || loss[a] != (ExporterLoss{Gaps: 1, Records: 2}) || loss[OtherExporter] != (ExporterLoss{Gaps: 1, Records: 7}) {
		t.Errorf("losses %v", loss)
	}
}
