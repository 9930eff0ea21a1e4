package nflog

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/nfnetlink"
)

func TestAggregate(t *testing.T) {
	var out []DenyFlow
	a := NewAggregator(AggregatorConfig{MaxFlows: 16, IdleTimeout: 10e9}, func(f *DenyFlow) { out = append(out, *f) })
	v4 := udp4(a4, b4, 1234, 7777, 1500, 128) // IP length 1500, 128 bytes copied
	v6 := udp6(a6, b6, 1234, 7777, 300, 128)
	msgs := []struct {
		msg []byte
		at  int64
	}{
		{full("deny ", v4), 0}, // carries NFULA_TIMESTAMP: that time wins over at
		{newMsg(nfnetlink.FamilyInet, 5).attr(nfulaPrefix, []byte("deny \x00")...).be32(nfulaIfindexIndev, 3).attr(nfulaPayload, v4...).bytes(), 2e18},
		{newMsg(nfnetlink.FamilyInet, 5).attr(nfulaPrefix, []byte("other\x00")...).attr(nfulaPayload, v4...).bytes(), 3e18},
		{newMsg(nfnetlink.FamilyInet, 6).attr(nfulaPrefix, []byte("deny \x00")...).attr(nfulaPayload, v4...).bytes(), 4e18},
		{newMsg(nfnetlink.FamilyInet6, 5).attr(nfulaPayload, v6...).bytes(), 5e18},
		{newMsg(nfnetlink.FamilyInet6, 5).attr(nfulaPayload, v6...).bytes(), 6e18},
	}
	for _, m := range msgs {
		if err := a.Message(m.msg, m.at); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Message(newMsg(nfnetlink.FamilyInet, 5).attr(nfulaPayload, 0x45, 0).bytes(), 0); !errors.Is(err, ErrPayload) || a.Stats.Errors[ReasonBadPayload] != 1 {
		t.Errorf("bad payload: %v %v", err, a.Stats.Errors)
	}
	if a.Table.Len() != 4 {
		t.Fatalf("%d flows, want 4", a.Table.Len())
	}
	if n := a.Expire(6e18 + 10e9 - 1); n != 3 { // all but the IPv6 flow are idle
		t.Fatalf("expired %d, want 3: %+v", n, out)
	}
	a.Flush()
	key4 := flow.Key{SrcPort: 1234, DstPort: 7777, Proto: flow.ProtoUDP, IPVersion: 4}
	flow.SetAddr4(&key4.SrcAddr, a4[:])
	flow.SetAddr4(&key4.DstAddr, b4[:])
	key6 := flow.Key{SrcAddr: a6, DstAddr: b6, SrcPort: 1234, DstPort: 7777, Proto: flow.ProtoUDP, IPVersion: 6}
	want := []DenyFlow{
		{Key: key4, Prefix: "deny ", Group: 5, Packets: 2, Bytes: 3000, First: 1700000000_250000000, Last: 2e18, InIf: 3, Verdict: VerdictDeny, End: EndIdle},
		{Key: key4, Prefix: "other", Group: 5, Packets: 1, Bytes: 1500, First: 3e18, Last: 3e18, Verdict: VerdictDeny, End: EndIdle},
		{Key: key4, Prefix: "deny ", Group: 6, Packets: 1, Bytes: 1500, First: 4e18, Last: 4e18, Verdict: VerdictDeny, End: EndIdle},
		{Key: key6, Group: 5, Packets: 2, Bytes: 680, First: 5e18, Last: 6e18, Verdict: VerdictDeny, End: EndFlush},
	}
	if len(out) != len(want) {
		t.Fatalf("got %+v", out)
	}
	for i := range want {
		if out[i] != want[i] {
			t.Errorf("flow %d:\n got %+v\nwant %+v", i, out[i], want[i])
		}
	}
	if a.Table.Len() != 0 || a.Table.Exported != 4 || a.Stats.Packets != 6 {
		t.Errorf("len %d exported %d stats %+v", a.Table.Len(), a.Table.Exported, a.Stats)
	}
}

func TestSeqGaps(t *testing.T) {
	a := NewAggregator(AggregatorConfig{}, nil)
	pl := udp4(a4, b4, 1, 2, 100, 100)
	for _, seq := range []uint32{7, 8, 11, 12, 0} { // 9 and 10 lost; 0: the group was rebound
		a.Message(newMsg(nfnetlink.FamilyInet, 5).be32(nfulaSeq, seq).attr(nfulaPayload, pl...).bytes(), 1)
	}
	if a.Stats.SeqGaps != 2 {
		t.Errorf("gaps %d, want 2", a.Stats.SeqGaps)
	}
}

func TestEvictStalest(t *testing.T) {
	var out []DenyFlow
	var pf Prefixes
	tb := NewDenyTable(3, 1e9, &pf, func(f *DenyFlow) { out = append(out, *f) })
	var p Packet
	k := func(port uint16) *DenyKey {
		return &DenyKey{Flow: flow.Key{SrcPort: port, IPVersion: 4}, Prefix: pf.ID([]byte("x"))}
	}
	tb.Add(k(1), 10, 1, &p)
	tb.Add(k(2), 10, 2, &p)
	tb.Add(k(3), 10, 3, &p)
	tb.Add(k(1), 10, 4, &p) // 1 is fresh again; 2 is the stalest
	tb.Add(k(4), 10, 5, &p)
	if len(out) != 1 || out[0].Key.SrcPort != 2 || out[0].End != EndEvicted || tb.Evicted != 1 || out[0].Prefix != "x" {
		t.Fatalf("evicted %+v (count %d)", out, tb.Evicted)
	}
	tb.Flush()
	if len(out) != 4 || out[1].Key.SrcPort != 3 || out[2].Key.SrcPort != 1 || out[2].Packets != 2 || out[3].Key.SrcPort != 4 {
		t.Errorf("flush order %+v", out)
	}
}

// TestTableModel checks the open-addressing table against a map under
// random adds, expiries and evictions with a tiny index (many collisions,
// wrap-around, backward shifts).
func TestTableModel(t *testing.T) {
	type agg struct{ packets, bytes uint64 }
	model := map[DenyKey]agg{}
	var exported uint64
	tb := NewDenyTable(64, 50, nil, func(f *DenyFlow) {
		k := DenyKey{Flow: f.Key, Group: f.Group}
		m, ok := model[k]
		if !ok || m.packets != f.Packets || m.bytes != f.Bytes {
			t.Fatalf("exported %+v, model %+v %v", f, m, ok)
		}
		delete(model, k)
		exported += f.Packets
	})
	tb.seed = 1 // deterministic
	r := rand.New(rand.NewPCG(1, 2))
	var p Packet
	var added uint64
	for now := int64(0); now < 20000; now++ {
		k := DenyKey{Flow: flow.Key{SrcPort: uint16(r.IntN(200)), IPVersion: 4}, Group: uint16(r.IntN(2))}
		k.Flow.SrcAddr = netip.AddrFrom4([4]byte{10, 0, 0, byte(r.IntN(3))}).As16()
		n := uint32(r.IntN(1500))
		tb.Add(&k, n, now, &p)
		m := model[k]
		model[k] = agg{m.packets + 1, m.bytes + uint64(n)}
		added++
		if now%97 == 0 {
			tb.Expire(now)
		}
		if tb.Len() != len(model) {
			t.Fatalf("at %d: table %d, model %d", now, tb.Len(), len(model))
		}
	}
	tb.Flush()
	if exported != added || len(model) != 0 || tb.Evicted == 0 {
		t.Errorf("exported %d of %d, left %d, evicted %d", exported, added, len(model), tb.Evicted)
	}
}

func TestPrefixes(t *testing.T) {
	var p Prefixes
	if p.ID(nil) != PrefixNone || p.Name(PrefixNone) != "" {
		t.Error("empty prefix")
	}
	a, b := p.ID([]byte("a")), p.ID([]byte("b"))
	if a == b || p.ID([]byte("a")) != a || p.Name(a) != "a" || p.Name(b) != "b" {
		t.Errorf("ids %d %d", a, b)
	}
	for i := range MaxPrefixes {
		p.ID([]byte{byte(i), byte(i >> 8), 'x'})
	}
	if p.Overflow == 0 || p.ID([]byte("new")) != PrefixOther || p.Name(PrefixOther) != "(other)" {
		t.Errorf("overflow %d", p.Overflow)
	}
	if n := testing.AllocsPerRun(100, func() { p.ID([]byte("a")) }); n != 0 {
		t.Errorf("%v allocs per known prefix", n)
	}
}

// TestTableActive: with an active timeout, busy flows are exported in
// pieces (EndActive) whose counts add up per flow to what was added, no
// record is empty, and a flow's records do not overlap in time.
func TestTableActive(t *testing.T) {
	type agg struct {
		packets, bytes uint64
		last           int64
	}
	got, want := map[DenyKey]agg{}, map[DenyKey]agg{}
	reasons := map[EndReason]int{}
	tb := NewDenyTable(64, 50, nil, func(f *DenyFlow) {
		k := DenyKey{Flow: f.Key, Group: f.Group}
		g := got[k]
		if f.Packets == 0 || f.First < g.last || f.Last < f.First {
			t.Fatalf("record %+v after one ending at %d", f, g.last)
		}
		got[k] = agg{g.packets + f.Packets, g.bytes + f.Bytes, f.Last}
		reasons[f.End]++
	})
	tb.SetActive(30)
	r := rand.New(rand.NewPCG(3, 4))
	var p Packet
	for now := int64(0); now < 20000; now++ {
		k := DenyKey{Flow: flow.Key{SrcPort: uint16(r.IntN(100)), IPVersion: 4}}
		n := uint32(r.IntN(1500))
		tb.Add(&k, n, now, &p)
		w := want[k]
		want[k] = agg{w.packets + 1, w.bytes + uint64(n), 0}
		if now%7 == 0 {
			tb.Expire(now)
		}
	}
	tb.Flush()
	for k, w := range want {
		if g := got[k]; g.packets != w.packets || g.bytes != w.bytes {
			t.Errorf("%v: exported %d/%d, added %d/%d", k.Flow.SrcPort, g.packets, g.bytes, w.packets, w.bytes)
		}
	}
	if reasons[EndActive] == 0 || reasons[EndFlush] == 0 {
		t.Errorf("reasons %v: active and flush records expected", reasons)
	}
}
