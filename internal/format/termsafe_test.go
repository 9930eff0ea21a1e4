package format

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/termsafe"
)

// hostile is an interface name (or rule, or workload) that sets the
// window title, clears the screen and reverses the text after it.
const hostile = "\x1b]0;owned\x07\x1b[2J\x1b[Heth\u202e0"

// hostileRecs are two records, one with every outside string hostile.
func hostileRecs() []flow.Record {
	a := rec("10.0.0.1", "10.0.0.2", 40000, 443, flow.ProtoTCP)
	b := rec("10.0.0.3", "10.0.0.4", 5000, 53, flow.ProtoUDP)
	b.Iface = hostile
	b.Verdict, b.Rule = flow.VerdictDeny, hostile
	b.SrcWorkload = &flow.Workload{Name: hostile, Namespace: "ns\x1b[31m"}
	b.DstWorkload = &flow.Workload{Name: "db\u2066"}
	b.Service = &flow.Service{Name: hostile}
	b.ServiceMatch = flow.ServiceMatchVIP
	return []flow.Record{a, b}
}

// checkInert fails if out holds anything a terminal would act on, and
// checks that the column after IFACE (SHARE, when present) starts at the
// same rune offset on every line: widths were taken on the escaped text.
func checkInert(t *testing.T, what, out string) {
	t.Helper()
	if !termsafe.Inert(out) || strings.ContainsRune(out, '\t') {
		t.Errorf("%s: output is not inert:\n%q", what, out)
	}
	if !strings.Contains(out, `\x1b]0;owned\a\x1b[2J\x1b[Heth\u202e0`) {
		t.Errorf("%s: the escaped interface name is missing:\n%s", what, out)
	}
	lines := strings.Split(out, "\n")
	col := -1
	for _, l := range lines {
		if i := strings.Index(l, "SHARE"); i >= 0 {
			col = utf8.RuneCountInString(l[:i])
		}
	}
	if col < 0 {
		return
	}
	for _, l := range lines {
		if i := strings.Index(l, "%"); i >= 0 && !strings.Contains(l, "flows (") {
			start := strings.LastIndex(l[:i], " ") + 1
			if got := utf8.RuneCountInString(l[:start]); got != col {
				t.Errorf("%s: share column at %d, header at %d:\n%s", what, got, col, out)
			}
		}
	}
}

// TestTableEscapesOutsideStrings: every table path (top N, streaming, the
// live view) prints hostile names escaped, and the columns still line up.
func TestTableEscapesOutsideStrings(t *testing.T) {
	for _, top := range []int{0, 5} {
		var buf bytes.Buffer
		tb := NewTable(&buf, top)
		if err := tb.Write(hostileRecs()); err != nil {
			t.Fatal(err)
		}
		if err := tb.Close(); err != nil {
			t.Fatal(err)
		}
		checkInert(t, map[int]string{0: "streaming", 5: "top"}[top], buf.String())
		for _, want := range []string{`deny \x1b]0;owned`, `(ns\x1b[31m/\x1b]0;owned`, `(db\u2066)`, `[\x1b]0;owned\a\x1b[2J\x1b[Heth\u202e0 vip]`} {
			if !strings.Contains(buf.String(), want) {
				t.Errorf("top %d: %q missing:\n%s", top, want, buf.String())
			}
		}
	}
	var buf bytes.Buffer
	if err := WriteFlows(&buf, "live", hostileRecs()); err != nil {
		t.Fatal(err)
	}
	checkInert(t, "live view", buf.String())
}
