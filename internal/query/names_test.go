package query

import (
	"slices"
	"strings"
	"testing"
)

// TestAttributeLists checks that the exported name lists are what the
// parsers accept: every group attribute parses as that one group-by, every
// condition name is known to the condition parser (a bad value is then
// the complaint, never the attribute), and a name not listed is refused.
func TestAttributeLists(t *testing.T) {
	for _, n := range GroupAttributes() {
		g, err := ParseGroupBy(n)
		if err != nil || len(g) != 1 || g[0].String() != n {
			t.Errorf("group attribute %q: %v %v", n, g, err)
		}
	}
	if len(GroupAttributes()) != int(numAttrs) {
		t.Errorf("%d group attributes listed, %d exist", len(GroupAttributes()), numAttrs)
	}
	known := func(name string) bool {
		_, err := ParseCondition(name + " = 'x y'")
		return err == nil || !strings.Contains(err.Error(), "unknown attribute") && !strings.Contains(err.Error(), "expected a comparison")
	}
	for _, n := range ConditionAliases() {
		if !known(n) {
			t.Errorf("condition name %q is listed but not accepted", n)
		}
	}
	for _, n := range ConditionAttributes() {
		if !slices.Contains(ConditionAliases(), n) {
			t.Errorf("condition attribute %q not among the accepted names", n)
		}
	}
	if known("nosuchattr") {
		t.Error("the check accepts any name")
	}
}
