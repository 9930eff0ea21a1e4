package meter

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/source"
	"github.com/weir-dev/weir/internal/source/synthetic"
)

// failing is a source that fails after its frames.
type failing struct {
	frames
	err     error
	warning string
}

func (f *failing) Next(fr *source.Frame) error {
	if err := f.frames.Next(fr); err != nil {
		return f.err
	}
	return nil
}
func (f *failing) Warning() string { return f.warning }

// TestReplayProducer: a replay writes every flow of its source to the
// sink it is run with, says a source's failure with the records before
// it, passes on its warning, and writes --stats.
func TestReplayProducer(t *testing.T) {
	src, err := synthetic.New(synthetic.Config{Flows: 300, Packets: 5000, IPv6Share: 0.5, UDPShare: 0.5, MaxPayload: 1400, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReplay(ReplayConfig{Meter: Config{Table: tableConfig(1024)}, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	var out collect
	if err := r.Run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Frames != 5000 || st.Records != uint64(len(out.recs)) || len(out.recs) < 300 {
		t.Errorf("%d frames, %d records, sink saw %d", st.Frames, st.Records, len(out.recs))
	}
	var w bytes.Buffer
	r.WriteStats(&w)
	if !strings.Contains(w.String(), "frames      5,000 read") || !strings.Contains(w.String(), "300 flows created") {
		t.Errorf("stats:\n%s", w.String())
	}

	boom := errors.New("damaged at offset 99")
	all, _, _ := conv(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 1000, nil, 1e9)
	f := &failing{frames: frames{f: all}, err: boom, warning: "b.pcap out of order"}
	var logs []string
	r, err = NewReplay(ReplayConfig{Meter: Config{Table: tableConfig(64)}, Source: f,
		Logf: func(format string, a ...any) { logs = append(logs, format) }})
	if err != nil {
		t.Fatal(err)
	}
	out = collect{}
	err = r.Run(context.Background(), &out)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "cut short") || len(out.recs) != 1 {
		t.Errorf("failing source: %v, %d records; want its error, cut short, 1 record", err, len(out.recs))
	}
	if len(logs) != 1 {
		t.Errorf("warning not passed on: %q", logs)
	}
}
