package services

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/termsafe"
)

// TestExplainEscapesNames: switch and router names come from the
// inventory; 'weir services explain' prints them escaped.
func TestExplainEscapesNames(t *testing.T) {
	n0, n1 := StressNode(0), StressNode(1)
	n0.Switch, n0.Router = "ls\x1b]0;owned\x07", "lr\u202e0"
	n1.Switch = "ls\x1b[2J"
	m, err := Build(Config{}, []Node{n0, n1}, []LB{StressLB(0)}, []Group{StressGroupOf(1)})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteExplain(&b, m.Explain(netip.MustParseAddr("42.0.0.1"), 8080), 10); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !termsafe.Inert(out) {
		t.Fatalf("explain output is not inert:\n%q", out)
	}
	for _, want := range []string{`ls\x1b]0;owned\a`, `lr\u202e0`, `ls\x1b[2J`} {
		if !strings.Contains(out, want) {
			t.Errorf("%q missing:\n%s", want, out)
		}
	}
}
