package ipfixrecv

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/ipfix"
)

// bytesConn is a connection that reads b, deterministically (a net.Pipe
// would split reads as goroutines happen to run, and the fuzzer's
// coverage would not reproduce).
type bytesConn struct {
	net.Conn
	r *bytes.Reader
}

func (c *bytesConn) Read(b []byte) (int, error)      { return c.r.Read(b) }
func (c *bytesConn) SetReadDeadline(time.Time) error { return nil }

// FuzzStream: any bytes on a TCP connection: the
// stream ends (at the end of the bytes or at a header that is not IPFIX)
// without a panic, every record decoded reaches the sink, and the
// connection's template state goes back to the budget.
func FuzzStream(f *testing.F) {
	var enc bytes.Buffer
	for _, m := range encodeMsgsF(f, ipfix.Config{}, randRecords(20, 31)) {
		enc.Write(m)
	}
	f.Add(enc.Bytes()[:min(enc.Len(), 600)])
	f.Add(append(oneFieldMsg(0, 1, true), oneFieldMsg(1, 1, true)...))
	f.Add(append(oneFieldMsg(0, 1, true), 0, 10, 0, 3))             // a length under 16
	f.Add(append(oneFieldMsg(0, 1, true), 0, 9, 0, 40, 1, 2))       // not IPFIX
	f.Add(append(oneFieldMsg(0, 1, true), 0, 10, 0x40, 0, 1, 2, 3)) // cut short
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	peer := netip.MustParseAddrPort("192.0.2.1:4739")
	f.Fuzz(func(t *testing.T, b []byte) {
		m := &memSink{}
		c := newCollector(Config{FlushInterval: time.Minute, IdleConnTimeout: time.Minute, Batch: 8})
		c.out = m
		c.serveStream(&bytesConn{r: bytes.NewReader(b)}, peer, nil)
		st := c.Stats()
		if uint64(m.len()) != st.Records || st.TemplatesLive != 0 || st.SessionsLive != 0 || st.BudgetUsed != 0 {
			t.Fatalf("%d records in the sink, %+v", m.len(), st)
		}
	})
}

// encodeMsgsF is encodeMsgs for a fuzz target's seeds.
func encodeMsgsF(f *testing.F, cfg ipfix.Config, recs []flow.Record) [][]byte {
	var msgs [][]byte
	e, err := ipfix.NewEncoder(cfg, func(b []byte) error { msgs = append(msgs, append([]byte(nil), b...)); return nil })
	if err != nil {
		f.Fatal(err)
	}
	for i := range recs {
		e.Add(&recs[i])
	}
	e.Flush()
	return msgs
}
