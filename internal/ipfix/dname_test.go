package ipfix

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/weir-dev/weir/internal/flow"
)

// decodedName is what the decoder makes of an interface name sent whole.
func decodedName(s string) string {
	b, _ := SanitiseName(nil, []byte(s))
	return string(b)
}

// TestSanitiseName: printable names of up to 64 bytes pass unchanged;
// terminal escapes, control characters and invalid bytes become U+FFFD;
// long names are cut at a rune boundary.
func TestSanitiseName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"eth0", "eth0"},
		{"vlan.100@bond0", "vlan.100@bond0"},
		{"éth0", "éth0"},
		{"\x1b]0;pwned\x07eth0", "\uFFFD]0;pwned\uFFFDeth0"},   // OSC title
		{"\x1b[2J\x1b[Heth1", "\uFFFD[2J\uFFFD[Heth1"},         // clear screen
		{"a\xffb\xc3", "a\uFFFDb\uFFFD"},                       // invalid UTF-8
		{"tab\there\nnl\u202e", "tab\uFFFDhere\uFFFDnl\uFFFD"}, // controls, a bidi override
		{strings.Repeat("x", 70), strings.Repeat("x", 64)},
		{strings.Repeat("x", 62) + "é", strings.Repeat("x", 62) + "é"},    // 64 bytes
		{strings.Repeat("x", 63) + "é", strings.Repeat("x", 63)},          // the rune does not fit
		{strings.Repeat("x", 61) + "\U0001F600", strings.Repeat("x", 61)}, // 4-byte rune past 64
		{strings.Repeat("x", 61) + "\x00", strings.Repeat("x", 61) + "\uFFFD"},
	} {
		got, changed := SanitiseName(nil, []byte(c.in))
		if string(got) != c.want || changed != (c.in != c.want) {
			t.Errorf("%q: got %q (changed %v), want %q", c.in, got, changed, c.want)
		}
	}
}

// FuzzSanitiseName: any bytes give printable UTF-8 of at most 64 bytes,
// unchanged exactly when the input was already that, the same from the
// input cut to MaxNameKey (what the decoder interns by), and stable.
func FuzzSanitiseName(f *testing.F) {
	for _, s := range []string{"eth0", "\x1b]0;x\x07", "a\xffb", strings.Repeat("é", 40), strings.Repeat("x", 61) + "\U0001F600"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, changed := SanitiseName(nil, b)
		if len(got) > MaxNameLen || !utf8.Valid(got) {
			t.Fatalf("%q → %q: over %d bytes or not UTF-8", b, got, MaxNameLen)
		}
		for _, r := range string(got) {
			if !unicode.IsPrint(r) {
				t.Fatalf("%q → %q: unprintable %U", b, got, r)
			}
		}
		printable := len(b) <= MaxNameLen && utf8.Valid(b) && !strings.ContainsFunc(string(b), func(r rune) bool { return !unicode.IsPrint(r) })
		if changed == printable || (!changed && !bytes.Equal(got, b)) {
			t.Fatalf("%q → %q, changed %v", b, got, changed)
		}
		if cut, _ := SanitiseName(nil, b[:min(len(b), MaxNameKey)]); !bytes.Equal(cut, got) {
			t.Fatalf("%q → %q, but cut to %d bytes → %q", b, got, MaxNameKey, cut)
		}
		if again, ch := SanitiseName(nil, got); ch || !bytes.Equal(again, got) {
			t.Fatalf("%q → %q → %q", b, got, again)
		}
	})
}

// TestDecodeNames: names reach records sanitised, each distinct name is
// counted once, and past the session's 256 names records carry
// flow.OtherIface, counted per record.
func TestDecodeNames(t *testing.T) {
	d := NewDecoder(DecoderConfig{})
	tmpl := set(2, u16s(400, 2, 8, 4, 82, Variable))
	rec := func(name string) []byte { return cat([]byte{10, 0, 0, 1}, varStr(name)) }
	got, errs := collectAll(t, d, build(Version, 0, 1, tmpl, set(400, rec("eth0"), rec("\x1b[2Jx"), rec("\x1b[2Jx"), rec(strings.Repeat("n", 300)))))
	if len(errs) > 0 || len(got) != 4 || got[0].Iface != "eth0" || got[1].Iface != "\uFFFD[2Jx" || got[2].Iface != got[1].Iface ||
		got[3].Iface != strings.Repeat("n", 64) {
		t.Fatalf("records %v, errors %v", got, errs)
	}
	if st := d.Stats(); st.NamesSanitised != 2 || st.NamesRefused != 0 {
		t.Errorf("stats %+v: want 2 names sanitised", st)
	}
	var msgs [][]byte
	for i := range 300 {
		msgs = append(msgs, build(Version, uint32(4+i), 1, set(400, rec("if-"+strings.Repeat("z", i%7)+string(rune('a'+i%26))+string(rune('0'+i/26))))))
	}
	got, _ = collectAll(t, d, msgs...)
	other := 0
	for _, g := range got {
		if g.Iface == flow.OtherIface {
			other++
		}
	}
	if st := d.Stats(); other != 300-(maxNames-3) || st.NamesRefused != uint64(other) {
		t.Errorf("%d records named %q, %d refused; want %d", other, flow.OtherIface, st.NamesRefused, 300-(maxNames-3))
	}
}

// TestDecodeRetime: with MaxClockSkew, times further from the receive
// time than it (1677, 2262, 1970) become the receive time, with their
// duration when it is sane; records without times get the receive time;
// times within it pass unchanged. Each is counted.
func TestDecodeRetime(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	d := NewDecoder(DecoderConfig{MaxClockSkew: 24 * time.Hour, Now: func() time.Time { return now }})
	tmpl := set(2, u16s(400, 3, 2, 4, 152, 8, 153, 8)) // packets, flowStart/EndMilliseconds
	ms := func(t time.Time) uint64 { return uint64(t.UnixMilli()) }
	rec := func(start, end uint64) []byte {
		return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64([]byte{0, 0, 0, 1}, start), end)
	}
	notime := set(2, u16s(401, 1, 2, 4))
	n := now.UnixNano()
	for _, c := range []struct {
		name       string
		start, end uint64
		want       [2]int64
	}{
		{"within", ms(now.Add(-23 * time.Hour)), ms(now.Add(-22 * time.Hour)), [2]int64{n - 23*3600e9, n - 22*3600e9}},
		{"future", ms(now.Add(30 * time.Hour)), ms(now.Add(30*time.Hour + time.Minute)), [2]int64{n - 60e9, n}},
		{"1970", 0, 5000, [2]int64{n - 5e9, n}},
		{"2262", uint64(math.MaxInt64) / 1_000_000, uint64(math.MaxInt64) / 1_000_000, [2]int64{n, n}},
		{"overflow", math.MaxUint64, math.MaxUint64, [2]int64{n, n}},
		{"backwards", ms(now.Add(48 * time.Hour)), ms(now.Add(-48 * time.Hour)), [2]int64{n, n}},
		{"too long", ms(now.Add(-100 * 24 * time.Hour)), ms(now), [2]int64{n, n}},
	} {
		d2 := NewDecoder(DecoderConfig{MaxClockSkew: 24 * time.Hour, Now: func() time.Time { return now }})
		got, errs := collectAll(t, d2, build(Version, 0, 1, tmpl, set(400, rec(c.start, c.end))))
		if len(errs) > 0 || len(got) != 1 || got[0].Start != c.want[0] || got[0].End != c.want[1] {
			t.Errorf("%s: %v %v, want %v", c.name, got, errs, c.want)
			continue
		}
		if skew := d2.Stats().ClockSkew; skew != map[bool]uint64{true: 0, false: 1}[c.name == "within"] {
			t.Errorf("%s: %d clock skew", c.name, skew)
		}
	}
	got, _ := collectAll(t, d, build(Version, 0, 1, notime, set(401, []byte{0, 0, 0, 1})))
	if st := d.Stats(); len(got) != 1 || got[0].Start != n || got[0].End != n || st.NoTime != 1 || st.ClockSkew != 0 {
		t.Errorf("record without times: %v, stats %+v", got, st)
	}
	// Off (0): times as sent.
	got, _ = collectAll(t, NewDecoder(DecoderConfig{Now: func() time.Time { return now }}), build(Version, 0, 1, tmpl, set(400, rec(0, 5000))))
	if len(got) != 1 || got[0].Start != 0 || got[0].End != 5e9 {
		t.Errorf("without MaxClockSkew: %v", got)
	}
}
