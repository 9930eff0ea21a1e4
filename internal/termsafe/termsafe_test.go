package termsafe

import (
	"strconv"
	"strings"
	"testing"
)

// Hostile names: what a terminal would act on, and what must come out.
var cases = []struct{ in, want string }{
	{"eth0", "eth0"},
	{"", ""},
	{"café-é", "café-é"}, // printable non-ASCII stays
	{"网卡0", "网卡0"},
	{"\x1b]0;pwned\x07eth0", `\x1b]0;pwned\aeth0`},       // OSC window title
	{"\x1b[2J\x1b[Heth0", `\x1b[2J\x1b[Heth0`},           // clear screen, cursor home
	{"eth\u202e0ht", `eth\u202e0ht`},                     // right-to-left override
	{"a\u2066b\u2069", `a\u2066b\u2069`},                 // isolates
	{"a\u200bb\ufeff", `a\u200bb\ufeff`},                 // zero-width space, BOM
	{"\u009b31m", `\u009b31m`},                           // C1 CSI
	{"tab\there\nnew\rcr\x7f", `tab\there\nnew\rcr\x7f`}, // C0, DEL
	{"bad\xff\xc3(utf8", `bad\xff\xc3(utf8`},             // invalid UTF-8
	{`back\slash`, `back\\slash`},                        // unambiguous
	{"\U000e0041tag", `\U000e0041tag`},                   // tag character (format)
	{"line\u2028sep", `line\u2028sep`},
	{"nb\u00a0sp", `nb\u00a0sp`},
}

func TestString(t *testing.T) {
	for _, c := range cases {
		got := String(c.in)
		if got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
		if !inert(got) {
			t.Errorf("String(%q) = %q still holds a control", c.in, got)
		}
	}
}

// TestMessageKeepsBackslashes: Message leaves escapes made earlier (%q)
// readable and still escapes what is live.
func TestMessageKeepsBackslashes(t *testing.T) {
	in := `interface "eth\x1b": ` + "\x1b[2J" + "\u202e"
	want := `interface "eth\x1b": \x1b[2J\u202e`
	if got := Message(in); got != want {
		t.Fatalf("Message(%q) = %q, want %q", in, got, want)
	}
}

// TestNoAllocWhenClean: the common case costs nothing.
func TestNoAllocWhenClean(t *testing.T) {
	s := "veth1234abcd"
	if n := testing.AllocsPerRun(100, func() { _ = String(s) }); n != 0 {
		t.Fatalf("%v allocs for a clean name", n)
	}
}

// TestWriter: lines and tabs pass, everything else live is escaped, and
// Write reports the length it was given.
func TestWriter(t *testing.T) {
	var b strings.Builder
	w := NewWriter(&b)
	in := "weir capture: skipping eth\x1b\u202e: gone\n\x1b]0;x\x07\tcol \\d\n"
	n, err := w.Write([]byte(in))
	if err != nil || n != len(in) {
		t.Fatalf("Write: %d, %v; want %d", n, err, len(in))
	}
	want := `weir capture: skipping eth\x1b\u202e: gone` + "\n" + `\x1b]0;x\a` + "\t" + `col \d` + "\n"
	if b.String() != want {
		t.Fatalf("wrote %q, want %q", b.String(), want)
	}
}

// inert is Inert without the newlines and tabs it lets pass.
func inert(s string) bool { return Inert(s) && !strings.ContainsAny(s, "\n\t") }

// FuzzString: the output is always inert, String round-trips through
// strconv.Unquote, and clean input comes back unchanged.
func FuzzString(f *testing.F) {
	for _, c := range cases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := String(s)
		if !inert(got) {
			t.Fatalf("String(%q) = %q is not inert", s, got)
		}
		if !strings.ContainsRune(s, '"') {
			back, err := strconv.Unquote(`"` + got + `"`)
			if err != nil || back != s {
				t.Fatalf("String(%q) = %q does not read back (%q, %v)", s, got, back, err)
			}
		}
		if inert(s) && !strings.Contains(s, `\`) && got != s {
			t.Fatalf("clean %q changed to %q", s, got)
		}
		if m := Message(s); !inert(m) {
			t.Fatalf("Message(%q) = %q is not inert", s, m)
		}
		var b strings.Builder
		if _, err := NewWriter(&b).Write([]byte(s)); err != nil || !Inert(b.String()) {
			t.Fatalf("Writer wrote %q for %q (%v)", b.String(), s, err)
		}
	})
}
