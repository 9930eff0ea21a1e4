package pcapfilter

import (
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// TestVLANAncillary checks vlan through the kernel's ancillary loads: the
// tag is already stripped from the frame and comes in meta.
func TestVLANAncillary(t *testing.T) {
	tcp80 := ethFrame("10.0.0.1", "10.0.0.2", flow.ProtoTCP, 1234, 80)
	udp53 := ethFrame("10.0.0.1", "10.0.0.2", flow.ProtoUDP, 1234, 53)
	metas := []meta{
		{},
		{vlanPresent: true, vlanTCI: 100},
		{vlanPresent: true, vlanTCI: 0x2000 | 100}, // priority 1, VLAN 100
		{vlanPresent: true, vlanTCI: 0x1000 | 200}, // DEI set, VLAN 200
		{vlanPresent: true, vlanTCI: 0},            // priority-tagged frame
		{vlanPresent: false, vlanTCI: 100},         // stale TCI without a tag: no VLAN
	}
	cases := []struct {
		expr string
		want func(m meta, isTCP80 bool) bool
	}{
		{"vlan", func(m meta, _ bool) bool { return m.vlanPresent }},
		{"not vlan", func(m meta, _ bool) bool { return !m.vlanPresent }},
		{"vlan 100", func(m meta, _ bool) bool { return m.vlanPresent && m.vlanTCI&0xfff == 100 }},
		{"vlan 0", func(m meta, _ bool) bool { return m.vlanPresent && m.vlanTCI&0xfff == 0 }},
		{"vlan 100 or vlan 200", func(m meta, _ bool) bool {
			return m.vlanPresent && (m.vlanTCI&0xfff == 100 || m.vlanTCI&0xfff == 200)
		}},
		// What follows vlan keeps the normal offsets: the tag is not in the frame.
		{"vlan and tcp port 80", func(m meta, tcp bool) bool { return m.vlanPresent && tcp }},
		{"vlan 200 and udp", func(m meta, tcp bool) bool { return m.vlanPresent && m.vlanTCI&0xfff == 200 && !tcp }},
		{"tcp or vlan 100", func(m meta, tcp bool) bool { return tcp || m.vlanPresent && m.vlanTCI&0xfff == 100 }},
	}
	for _, c := range cases {
		prog := mustCompile(t, c.expr, LinkEthernet)
		for _, m := range metas {
			for _, f := range []struct {
				data []byte
				tcp  bool
			}{{tcp80, true}, {udp53, false}} {
				if got, want := verdict(t, prog, f.data, m), c.want(m, f.tcp); got != want {
					t.Errorf("%q, meta %+v, tcp=%v: got %v, want %v", c.expr, m, f.tcp, got, want)
				}
			}
		}
	}
	// The loads are the documented ancillary offsets (linux/filter.h).
	prog := mustCompile(t, "vlan 100", LinkEthernet)
	want := []Instruction{
		{Op: 0x20, K: 0xfffff000 + 48}, // ld vlan_avail
		{Op: 0x15, Jt: 4, Jf: 0, K: 0}, // jeq #0 -> reject
		{Op: 0x20, K: 0xfffff000 + 44}, // ld vlan_tci
		{Op: 0x54, K: 0xfff},           // and #0xfff
		{Op: 0x15, Jt: 0, Jf: 1, K: 100},
		{Op: 0x06, K: DefaultSnaplen},
		{Op: 0x06, K: 0},
	}
	if len(prog) != len(want) {
		t.Fatalf("vlan 100:\n%s", disasm(prog))
	}
	for i := range want {
		if prog[i] != want[i] {
			t.Errorf("vlan 100 instruction %d: got %v, want %v\n%s", i, prog[i], want[i], disasm(prog))
		}
	}
}

// TestDirectionAncillary checks inbound/outbound against the packet type.
func TestDirectionAncillary(t *testing.T) {
	f := ethFrame("10.0.0.1", "10.0.0.2", flow.ProtoUDP, 1, 2)
	in, out := mustCompile(t, "inbound", LinkEthernet), mustCompile(t, "outbound and udp", LinkRaw)
	raw := f[14:]
	for pt := uint32(0); pt <= 4; pt++ { // PACKET_HOST .. PACKET_OUTGOING
		m := meta{pktType: pt}
		if got := verdict(t, in, f, m); got != (pt != 4) {
			t.Errorf("inbound, packet type %d: got %v", pt, got)
		}
		if got := verdict(t, out, raw, m); got != (pt == 4) {
			t.Errorf("outbound and udp on raw, packet type %d: got %v", pt, got)
		}
	}
}
