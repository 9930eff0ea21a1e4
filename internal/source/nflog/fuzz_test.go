package nflog

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/weir-dev/weir/internal/nfnetlink"
)

// FuzzDecode feeds arbitrary bytes to the decoder, the splitter and the
// aggregator. Seeds: hand-built messages and every message captured from
// the kernel in testdata/real.bin. Properties: no panic; an error is a
// sentinel counted under exactly one reason; decoding into a used Packet
// equals decoding into a fresh one; bounds hold (prefix ≤ MaxPrefixLen,
// no NUL in it); the aggregator accepts exactly what decodes with a
// payload the packet decoder takes, and counts a rejected message once.
func FuzzDecode(f *testing.F) {
	f.Add(full("weir-deny ", udp4(a4, b4, 1, 7777, 328, 128)))
	f.Add(newMsg(nfnetlink.FamilyInet6, 5).attr(nfulaPayload, udp6(a6, b6, 1, 2, 300, 128)...).bytes())
	f.Add(newMsg(nfnetlink.FamilyInet, 5).attr(nfulaPrefix, 'a').bytes())
	f.Add(newMsg(nfnetlink.FamilyInet, 5).attr(nfulaTimestamp, make([]byte, 16)...).attr(nfulaPayload, 0x45).bytes())
	if raw, err := os.ReadFile("testdata/real.bin"); err == nil {
		for len(raw) > 0 {
			msg, rest, err := NextMessage(raw)
			if err != nil {
				break
			}
			f.Add(msg)
			raw = rest
		}
	}
	var dirty Packet
	if err := new(Decoder).Decode(&dirty, full("x", udp4(a4, b4, 1, 2, 100, 100))); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		var d Decoder
		var p Packet
		err := d.Decode(&p, msg)
		var total uint64
		for _, n := range d.Errors {
			total += n
		}
		if err != nil {
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrBadAttr) && !errors.Is(err, ErrNotPacket) && !errors.Is(err, ErrPayload) {
				t.Fatalf("error %v is no sentinel", err)
			}
			if total != 1 || d.Errors[ReasonNone] != 0 {
				t.Fatalf("error %v counted as %v", err, d.Errors)
			}
		} else if total != 0 {
			t.Fatalf("no error, counted %v", d.Errors)
		}
		reused := dirty
		err2 := new(Decoder).Decode(&reused, msg)
		if (err == nil) != (err2 == nil) || string(reused.Prefix) != string(p.Prefix) || string(reused.Payload) != string(p.Payload) {
			t.Fatalf("decoding into a used Packet differs: %v %+v, fresh %v %+v", err2, reused, err, p)
		}
		reused.Prefix, reused.Payload, p.Prefix, p.Payload = nil, nil, nil, nil
		if err == nil && !reflect.DeepEqual(reused, p) {
			t.Fatalf("decoding into a used Packet differs: %+v, fresh %+v", reused, p)
		}
		var dp Packet
		d.Decode(&dp, msg)
		if len(dp.Prefix) > MaxPrefixLen {
			t.Fatalf("prefix of %d bytes", len(dp.Prefix))
		}
		for _, c := range dp.Prefix {
			if c == 0 {
				t.Fatalf("NUL in prefix %q", dp.Prefix)
			}
		}
		a := NewAggregator(AggregatorConfig{MaxFlows: 4}, nil)
		aerr := a.Message(msg, 1)
		if err != nil && (aerr == nil || a.Stats.Packets != 0) {
			t.Fatalf("aggregator took a message the decoder rejects: %v", aerr)
		}
		var errs uint64
		for _, n := range a.Stats.Errors {
			errs += n
		}
		if (aerr == nil) != (errs == 0) || errs > 1 || (aerr == nil) != (a.Table.Len() == 1) {
			t.Fatalf("aggregator: %v, errors %v, len %d", aerr, a.Stats.Errors, a.Table.Len())
		}
		for b := msg; len(b) > 0; {
			m, rest, err := NextMessage(b)
			if err != nil {
				break
			}
			if len(m) < nfnetlink.MsgHdrLen || len(rest) >= len(b) {
				t.Fatalf("splitter made no progress")
			}
			b = rest
		}
	})
}
