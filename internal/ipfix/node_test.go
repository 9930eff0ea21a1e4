package ipfix

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// TestNodeRoundTrip: records of a constant node, of nodes in runs, and of
// none decode with their nodes; a constant node is announced once (one
// options record, nothing per record: messages as long as without a node
// but for the announcement), a change of node finishes the message; a
// node after none is announced, and none after a node too.
func TestNodeRoundTrip(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes: cut to 254 at a rune start
	for _, c := range []struct {
		name  string
		node  func(i int) string
		wantN func(i int) string
	}{
		{"constant", func(int) string { return "k8s-worker-1" }, nil},
		{"runs", func(i int) string { return []string{"node-a", "", "node-b", long}[i/37%4] }, func(i int) string {
			if i/37%4 == 3 {
				return long[:254]
			}
			return ""
		}},
		{"none", func(int) string { return "" }, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			var msgs [][]byte
			e, _ := NewEncoder(Config{Domain: 9, RefreshMessages: 7}, func(m []byte) error { msgs = append(msgs, bytes.Clone(m)); return nil })
			var want []flow.Record
			for i := range 600 {
				rec := randRecord(r, i)
				rec.Node = c.node(i)
				if err := e.Add(&rec); err != nil {
					t.Fatal(err)
				}
				rec.Start -= rec.Start % 1e6
				rec.End -= rec.End % 1e6
				rec.Iface = decodedName(rec.Iface)
				if rec.EndReason == flow.ReasonEOF || rec.EndReason == flow.ReasonNone {
					rec.EndReason = flow.ReasonShutdown
				}
				if c.wantN != nil && c.wantN(i) != "" {
					rec.Node = c.wantN(i)
				}
				want = append(want, rec)
			}
			e.Flush()
			d := NewDecoder(DecoderConfig{})
			got, errs := collectAll(t, d, msgs...)
			if len(errs) > 0 || len(got) != len(want) {
				t.Fatalf("%d records of %d, errors %v", len(got), len(want), errs)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("record %d:\n got %+v\nwant %+v", i, got[i], want[i])
				}
			}
			if st := d.Stats(); st.SequenceGaps != 0 {
				t.Errorf("%d sequence gaps", st.SequenceGaps)
			}
			opts := d.Stats().OptionsRecords
			switch c.name {
			case "constant": // announced with every template refresh: once per 7 messages
				if opts == 0 || opts > uint64(len(msgs)/7+2) {
					t.Errorf("%d options records in %d messages", opts, len(msgs))
				}
			case "none":
				if opts != 0 {
					t.Errorf("%d options records without a node", opts)
				}
			}
		})
	}
}

// TestNodeWireCost: a constant node adds no byte to a record: the data
// sets of a node's records are as long as without one.
func TestNodeWireCost(t *testing.T) {
	size := func(node string) (data int) {
		r := rand.New(rand.NewPCG(5, 6))
		e, _ := NewEncoder(Config{RefreshMessages: -1, RefreshInterval: -1}, func(m []byte) error {
			for p := headerLen; p+4 <= len(m); {
				id, l := binary.BigEndian.Uint16(m[p:]), int(binary.BigEndian.Uint16(m[p+2:]))
				if id >= 256 && id != TemplateNode && id != TemplateSampling {
					data += l
				}
				p += l
			}
			return nil
		})
		for i := range 1000 {
			rec := randRecord(r, i)
			rec.Node = node
			e.Add(&rec)
		}
		e.Flush()
		return data
	}
	if a, b := size(""), size("node-with-a-long-name.example.internal"); a != b {
		t.Errorf("data sets: %d bytes without a node, %d with one", a, b)
	}
}

// TestNodeOtherExporters: observationDomainName in a data record is that
// record's node (sanitised: a terminal escape becomes U+FFFD); in options
// data it names the session's records that name none, until another
// options record says otherwise ("" clears it).
func TestNodeOtherExporters(t *testing.T) {
	tmpl := append(u16s(256, 3), u16s(8, 4, 12, 4, IEObservationDomainName, Variable)...)
	opt := append(u16s(TemplateNode, 2, 1), u16s(IEObservationDomainID, 4, IEObservationDomainName, Variable)...)
	rec := func(last byte, node string) []byte {
		b := []byte{10, 0, 0, last, 10, 0, 0, 99, byte(len(node))}
		return append(b, node...)
	}
	optRec := func(name string) []byte {
		b := binary.BigEndian.AppendUint32(nil, 1)
		return append(append(b, byte(len(name))), name...)
	}
	plain := append(u16s(257, 2), u16s(8, 4, 12, 4)...)
	msgs := [][]byte{
		build(Version, 0, 1, set(2, tmpl, plain), set(3, opt), set(256, rec(1, "edge-1"), rec(2, "bad\x1b]0;x\x07"))),
		build(Version, 2, 1, set(257, []byte{10, 0, 0, 3, 10, 0, 0, 99})),                                        // no node yet
		build(Version, 3, 1, set(TemplateNode, optRec("router-7")), set(257, []byte{10, 0, 0, 4, 10, 0, 0, 99})), // the domain's name
		build(Version, 5, 1, set(256, rec(5, ""), rec(6, "own"))),                                                // named in the record wins
		build(Version, 7, 1, set(TemplateNode, optRec("")), set(257, []byte{10, 0, 0, 7, 10, 0, 0, 99})),
	}
	d := NewDecoder(DecoderConfig{})
	got, errs := collectAll(t, d, msgs...)
	if n := d.Stats().NodesSanitised; n != 1 {
		t.Errorf("%d node names sanitised, want 1", n)
	}
	if len(errs) > 0 || len(got) != 7 {
		t.Fatalf("%d records, errors %v", len(got), errs)
	}
	want := []string{"edge-1", "bad\ufffd]0;x\ufffd", "", "router-7", "router-7", "own", ""}
	for i, w := range want {
		if got[i].Node != w {
			t.Errorf("record %d: node %q, want %q", i, got[i].Node, w)
		}
	}
}

// TestNodeChangeAnnouncement: a change of node finishes the open message
// and starts the next with the node's options template and record alone:
// the data templates are not sent again until they are due.
func TestNodeChangeAnnouncement(t *testing.T) {
	var msgs [][]byte
	e, _ := NewEncoder(Config{RefreshMessages: -1, RefreshInterval: -1}, func(m []byte) error { msgs = append(msgs, bytes.Clone(m)); return nil })
	r := rand.New(rand.NewPCG(1, 1))
	for i := range 20 {
		rec := randRecord(r, i)
		rec.Key.IPVersion, rec.DropPackets, rec.Sampling = 4, 0, 0
		rec.Node = []string{"node-a", "node-b"}[i/10]
		if err := e.Add(&rec); err != nil {
			t.Fatal(err)
		}
	}
	e.Flush()
	sets := func(m []byte) (ids []uint16) {
		for p := headerLen; p+4 <= len(m); {
			ids = append(ids, binary.BigEndian.Uint16(m[p:]))
			p += int(binary.BigEndian.Uint16(m[p+2:]))
		}
		return ids
	}
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want 2 (one per node)", len(msgs))
	}
	first, second := sets(msgs[0]), sets(msgs[1])
	if first[0] != templateSet || !bytes.Contains(msgs[1], []byte("node-b")) || bytes.Contains(msgs[1], []byte("node-a")) {
		t.Errorf("sets %v then %v", first, second)
	}
	for _, id := range second {
		if id == templateSet {
			t.Errorf("the data templates were sent again for a change of node: sets %v", second)
		}
	}
	got, errs := collectAll(t, NewDecoder(DecoderConfig{}), msgs...)
	if len(errs) > 0 || len(got) != 20 || got[9].Node != "node-a" || got[10].Node != "node-b" {
		t.Fatalf("%d records, %v", len(got), errs)
	}
}
