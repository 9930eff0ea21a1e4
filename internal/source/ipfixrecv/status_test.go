package ipfixrecv

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	ipfixsink "github.com/weir-dev/weir/internal/sink/ipfix"
)

// fakeTerminal stands for a terminal: it keeps what is written.
type fakeTerminal struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (f *fakeTerminal) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.b.Write(p)
}

func (f *fakeTerminal) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.b.String()
}

// TestStatusLine: with a terminal as Status, the collector redraws one
// summary line in place (a carriage return, the line, clear to its end;
// never a newline) that counts the records, the exporter session and its
// template, and erases it when Run returns.
func TestStatusLine(t *testing.T) {
	term := &fakeTerminal{}
	c, m, stop := run(t, Config{Listen: []string{"udp://127.0.0.1:0"}, Sockets: 1, Status: term, StatusInterval: 20 * time.Millisecond})
	x, err := ipfixsink.New(ipfixsink.Config{URL: "ipfix+udp://" + c.Addrs()[0].String(), Domain: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := randRecords(250, 9)
	if err := x.Write(want); err != nil {
		t.Fatal(err)
	}
	x.Close()
	waitRecords(t, m, len(want))
	const full = "250 records; 1 exporter sessions, "
	for end := time.Now().Add(10 * time.Second); !strings.Contains(term.String(), full); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no status line with %q in 10 s:\n%q", full, term.String())
		}
	}
	stop()
	out := term.String()
	if strings.Contains(out, "\n") || !strings.HasSuffix(out, "\r\x1b[K") {
		t.Fatalf("status output has a newline or does not end erased:\n%q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\r\x1b[K"), "\r")
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "weir collect: ") || !strings.HasSuffix(l, "\x1b[K") || !strings.Contains(l, " records/s, ") {
			t.Errorf("status line %q", l)
		}
	}
	var seen bool
	for _, l := range lines {
		seen = seen || strings.Contains(l, full) && strings.Contains(l, "templates; drops: 0 datagrams by the kernel, 0 records lost by exporters")
	}
	if lines[0] != "" || !seen {
		t.Errorf("status lines %q", lines)
	}
}

// TestStatusText: the summary's numbers, with thousands separators and
// the rate rounded.
func TestStatusText(t *testing.T) {
	var st Stats
	st.Records, st.SessionsLive, st.TemplatesLive, st.SocketDrops, st.LostRecords = 1234567, 3, 12, 4000, 17
	want := "weir collect: 12,346 records/s, 1,234,567 records; 3 exporter sessions, 12 templates; drops: 4,000 datagrams by the kernel, 17 records lost by exporters"
	if got := statusText(&st, 12345.6); got != want {
		t.Errorf("%q\nwant %q", got, want)
	}
}
