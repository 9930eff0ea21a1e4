package query

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/termsafe"
)

// TestTableEscapesOutsideStrings: interface names, rules and workload
// names from the store (which came from the network or an inventory) are
// escaped in the table, with the columns aligned on the escaped text; CSV
// and JSON keep the exact strings (they escape in their own way).
func TestTableEscapesOutsideStrings(t *testing.T) {
	const hostile = "\x1b]0;owned\x07\x1b[2J\x1b[Heth\u202e0"
	recs := randRecords(rand.New(rand.NewPCG(3, 4)), 200)
	for i := range recs {
		r := &recs[i]
		r.DropPackets, r.DropBytes, r.DropReason = 0, 0, ""
		if i%2 == 0 {
			r.Iface, r.Verdict, r.Rule = hostile, flow.VerdictDeny, "drop\x1b[31m"
			r.SrcWorkload = &flow.Workload{Name: "web\u2067", Namespace: "shop"}
		} else {
			r.Iface = "eth0"
		}
	}
	s := writeStore(t, recs, 100)
	q := &Query{Group: []Attr{AttrIface, AttrRule, AttrSrcWorkload}, Limit: 0}
	res, err := Run(context.Background(), s, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tab bytes.Buffer
	if err := res.Write(&tab, Table); err != nil {
		t.Fatal(err)
	}
	out := tab.String()
	if !termsafe.Inert(out) || strings.ContainsRune(out, '\t') {
		t.Fatalf("table is not inert:\n%q", out)
	}
	for _, want := range []string{`\x1b]0;owned\a\x1b[2J\x1b[Heth\u202e0`, `drop\x1b[31m`, `web\u2067`} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Right-aligned columns: every row of the header's width.
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	width := utf8.RuneCountInString(lines[0])
	for _, l := range lines[1:4] { // header, two rows, total
		if utf8.RuneCountInString(l) != width {
			t.Errorf("misaligned row (%d runes, header %d):\n%s", utf8.RuneCountInString(l), width, out)
		}
	}
	var csvOut bytes.Buffer
	if err := res.Write(&csvOut, CSV); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(csvOut.String(), hostile) {
		t.Errorf("CSV should keep the exact name:\n%q", csvOut.String())
	}
}
