package conntrack

import (
	"errors"
	"os"
	"testing"

	"github.com/weir-dev/weir/internal/nfnetlink"
)

// FuzzDecode feeds arbitrary bytes to the decoder and the message
// splitter. Seeds: the hand-built messages of the unit tests and every
// message captured from the kernel in testdata/real.bin. Properties: no
// panic; an error is one of the sentinels and is counted under exactly
// one reason; decoding is deterministic and leaves nothing of an earlier
// message behind; accepted messages respect the field bounds.
func FuzzDecode(f *testing.F) {
	f.Add(full(a4, b4, nfnetlink.FamilyInet))
	f.Add(full(a6, b6, nfnetlink.FamilyInet6))
	f.Add(newMsg(ipctnlMsgCtDelete, 0, nfnetlink.FamilyInet).tuple(ctaTupleOrig, a4, b4, 1, 9, 8<<8).bytes())
	f.Add(newMsg(ipctnlMsgCtNew, 0, nfnetlink.FamilyInet).begin(ctaCountersOrig).be32(ctaCounters32Packets, 1).be32(ctaCounters32Bytes, 2).end().bytes())
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
	var dirty Conn
	if err := Decode(&dirty, full(a6, b6, nfnetlink.FamilyInet6)); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		var d Decoder
		var c Conn
		err := d.Decode(&c, msg)
		var total uint64
		for _, n := range d.Errors {
			total += n
		}
		if err != nil {
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrBadAttr) && !errors.Is(err, ErrNotConntrack) {
				t.Fatalf("error %v is no sentinel", err)
			}
			if total != 1 || d.Errors[ReasonNone] != 0 {
				t.Fatalf("error %v counted as %v", err, d.Errors)
			}
		} else if total != 0 {
			t.Fatalf("no error, counted %v", d.Errors)
		}
		reused := dirty
		err2 := Decode(&reused, msg)
		if (err == nil) != (err2 == nil) || (err == nil && reused != c) {
			t.Fatalf("decoding into a used Conn differs: %v %+v, fresh %v %+v", err2, reused, err, c)
		}
		if err == nil && (c.LabelLen > labelsLen || c.Type > MsgDelete) {
			t.Fatalf("out of bounds: %+v", c)
		}
		for b := msg; len(b) > 0; {
			m, rest, err := NextMessage(b)
			if err != nil {
				break
			}
			if len(m) < nfnetlink.MsgHdrLen || len(rest) >= len(b) {
				t.Fatalf("NextMessage made no progress: %d of %d", len(m), len(b))
			}
			b = rest
		}
	})
}
