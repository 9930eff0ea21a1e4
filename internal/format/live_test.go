package format

import (
	"bytes"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/termsafe"
)

// liveGolden is what the live table printed before LiveView existed (two
// views, appended): a LiveView not on a terminal must print it byte for
// byte, since pipes, files and scripts read it.
const liveGolden = "t1\nPROTO  SOURCE          DESTINATION   PACKETS  BYTES  REV PACKETS  REV BYTES  FLAGS   DURATION  REASON  IFACE\n" +
	"tcp    10.0.0.1:40000  10.0.0.2:443  3        180 B  2            2.93 KiB   FS./S.  1.5s      end     eth0\n" +
	"udp    10.0.0.3:5000   10.0.0.4:53   3        180 B  2            2.93 KiB   FS./S.  1.5s      end     eth0\n\n" +
	"t2\n(no live flows)\n"

func twoViews(t *testing.T, v *LiveView) {
	t.Helper()
	recs := []flow.Record{rec("10.0.0.1", "10.0.0.2", 40000, 443, flow.ProtoTCP), rec("10.0.0.3", "10.0.0.4", 5000, 53, flow.ProtoUDP)}
	if err := v.WriteFlows("t1", recs); err != nil {
		t.Fatal(err)
	}
	if err := v.WriteFlows("t2", nil); err != nil {
		t.Fatal(err)
	}
}

// countingWriter counts Write calls.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) { c.writes++; return c.Buffer.Write(p) }

// TestLiveViewAppends: not on a terminal, views follow one another exactly
// as WriteFlows writes them, without a control sequence.
func TestLiveViewAppends(t *testing.T) {
	var buf bytes.Buffer
	twoViews(t, NewLiveView(&buf, false))
	if buf.String() != liveGolden {
		t.Errorf("not a terminal:\n%q\nwant\n%q", buf.String(), liveGolden)
	}
}

// TestLiveViewRedraws: on a terminal each view is one Write that starts
// with cursor home and clear to the end of the screen, followed by the
// same table as elsewhere; hostile names stay inert (the only escape
// sequences are the redraw's own).
func TestLiveViewRedraws(t *testing.T) {
	var w countingWriter
	twoViews(t, NewLiveView(&w, true))
	frames := strings.Split(w.String(), cursorHome+clearToEnd)
	if w.writes != 2 || len(frames) != 3 || frames[0] != "" {
		t.Fatalf("%d writes, frames %q", w.writes, frames)
	}
	if frames[1]+frames[2] != liveGolden {
		t.Errorf("frames %q\nwant the tables %q", frames[1:], liveGolden)
	}
	var h bytes.Buffer
	v := NewLiveView(&h, true)
	if err := v.WriteFlows("live "+hostile, hostileRecs()); err != nil {
		t.Fatal(err)
	}
	body, ok := strings.CutPrefix(h.String(), cursorHome+clearToEnd)
	if !ok || !termsafe.Inert(body) {
		t.Errorf("redrawn hostile view is not inert after the redraw sequence:\n%q", h.String())
	}
	checkInert(t, "redrawn live view", body)
}

// TestStatusLine: each Set returns to the line's start, writes the text
// escaped and cut at a newline, and clears the rest of the line; Clear
// erases a shown line and writes nothing when none was shown.
func TestStatusLine(t *testing.T) {
	var buf bytes.Buffer
	s := NewStatusLine(&buf)
	if err := s.Clear(); err != nil || buf.Len() != 0 {
		t.Fatalf("Clear before Set wrote %q (%v)", buf.String(), err)
	}
	_ = s.Set("12 records/s")
	_ = s.Set("from " + hostile + "\nsecond line")
	_ = s.Clear()
	want := "\r12 records/s" + clearLine + "\r" + `from \x1b]0;owned\a\x1b[2J\x1b[Heth\u202e0` + clearLine + "\r" + clearLine
	if buf.String() != want {
		t.Errorf("status line %q\nwant %q", buf.String(), want)
	}
}
