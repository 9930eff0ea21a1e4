package packet

import (
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// TestShims: IP behind an LLC/SNAP header, a VN-Tag, an 802.1ah I-TAG, a
// FabricPath header and an integrity-only MACsec SecTAG is counted with
// its IP length; MACsec with encrypted data, other LLC frames and cut
// tags are not IP (the encapsulations of real captures, docs/corpus.md).
func TestShims(t *testing.T) {
	mac := []byte{0x02, 0, 0, 0, 0, 9}
	udp := func(f *fb) *fb { return f.ipv4(v4{src: a4, dst: b4, proto: 17}).udp(5353, 53).payload(20).done() }
	ip := []*fb{
		udp(eth().eth(0x0030).plain(0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00)),                  // RFC 1042 SNAP
		udp(eth().eth(0x0030).plain(0xaa, 0xaa, 0x03, 0, 0, 0xf8, 0x08, 0x00)),               // 802.1H SNAP
		udp(newFrame(LinkSLL).sll(0x0004).plain(0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00)),      // cooked 802.2
		udp(eth().eth(0x8100).vlan(7, 0x8926).plain(0, 5, 0, 9, 0x08, 0x00)),                 // VLAN, VN-Tag
		udp(eth().eth(0x88e7).plain(0, 0, 1, 0).plain(mac...).plain(mac...).plain(0x08, 0)),  // 802.1ah
		udp(eth().eth(0x8903).plain(0, 0x60).plain(mac...).plain(mac...).plain(0x08, 0)),     // FabricPath
		udp(eth().eth(0x88e5).plain(0x20, 0, 0, 0, 0, 1).plain(mac...).plain(0, 1, 0x08, 0)), // MACsec with SCI
		udp(eth().eth(0x88e5).plain(0x00, 0, 0, 0, 0, 1, 0x08, 0)),                           // MACsec without
	}
	d := NewDecoder(Config{})
	for i, f := range ip {
		var p flow.Packet
		if !d.Decode(f.link, f.b, len(f.b), &p) || p.Length != 48 || p.Key.Proto != 17 || p.Key.DstPort != 53 {
			t.Errorf("frame %d: not decoded as the 48-byte UDP packet: %+v", i, p)
		}
	}
	if i := 3; true {
		var p flow.Packet
		d.Decode(ip[i].link, ip[i].b, len(ip[i].b), &p)
		if p.VLAN != 7 {
			t.Errorf("VLAN before a VN-Tag: %d, want 7", p.VLAN)
		}
	}
	non := []*fb{
		eth().eth(0x88e5).plain(0x2c, 0, 0, 0, 0, 1).plain(mac...).plain(0, 1).payload(60), // MACsec, encrypted
		eth().eth(0x88e5).plain(0x04, 0, 0, 0, 0, 1, 0x08, 0).payload(40),                  // MACsec, changed text
		eth().eth(0x0030).plain(0xaa, 0xaa, 0x03, 0, 0, 0x0c, 0x20, 0).payload(40),         // SNAP, Cisco OUI (CDP)
		eth().eth(0x0030).plain(0x42, 0x42, 0x03).payload(40),                              // STP
		eth().eth(0x0030).plain(0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x06).payload(28),         // SNAP ARP
	}
	d = NewDecoder(Config{})
	for i, f := range non {
		var p flow.Packet
		if d.Decode(f.link, f.b, len(f.b), &p) {
			t.Errorf("non-IP frame %d decoded", i)
		}
	}
	var names []string
	d.Stats().EachNonIP(func(n string, c uint64) { names = append(names, n+"="+itoa(int(c))) })
	if got := strings.Join(names, " "); got != "llc=2 0x88e5=2 arp=1" && got != "llc=2 arp=1 0x88e5=2" && got != "llc=2 macsec=2 arp=1" {
		t.Errorf("non-IP counts %q", got)
	}
	cut := []*fb{
		eth().eth(0x8926).plain(0, 5, 0),    // VN-Tag cut
		eth().eth(0x88e5).plain(0x20, 0, 0), // SecTAG cut
	}
	d = NewDecoder(Config{})
	for _, f := range cut {
		var p flow.Packet
		d.Decode(f.link, f.b, len(f.b), &p)
	}
	if n := d.Stats().Errors[ReasonTruncatedVLAN]; n != 2 {
		t.Errorf("cut tags: %d truncated_vlan, want 2", n)
	}
}
