//go:build linux

package afpacket

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/craft"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/testhost"
)

// TestVLANFromAuxData: tagged frames injected on A's veth arrive at B,
// where the kernel strips the outer tag into the ring's auxiliary data
// before capture (no VLAN device is needed for that). weir reports the
// outer VLAN ID of 802.1Q and of 802.1ad (QinQ) frames, and exact counts.
func TestVLANFromAuxData(t *testing.T) {
	pr := testhost.NewPair(t)
	r := startCapture(t, testConfig(t, pr.B, pr.B.Iface), 1)
	const n = 100
	src, dst := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2") // never routed: frames die at B after capture
	cases := []struct {
		vlans []uint16
		qinq  bool
		port  uint16
	}{{[]uint16{100}, false, 26000}, {[]uint16{200, 30}, true, 26001}}
	err := pr.A.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		ifi, err := netInterfaceIndex(pr.A.Iface)
		if err != nil {
			return err
		}
		to := &unix.SockaddrLinklayer{Ifindex: ifi, Halen: 6}
		for _, c := range cases {
			p := craft.Packet{Link: packet.LinkEthernet, VLANs: c.vlans, QinQ: c.qinq, Src: src, Dst: dst,
				Proto: flow.ProtoUDP, SrcPort: 5000, DstPort: c.port, Payload: 50}
			frame := p.Append(nil)
			for range n {
				if err := unix.Sendto(fd, frame, 0, to); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	recs := r.stop()
	got := map[uint16]flow.Record{}
	for _, rec := range recs {
		if rec.Key.Src() == src {
			got[rec.Key.DstPort] = rec
		}
	}
	for _, c := range cases {
		rec, ok := got[c.port]
		if want := uint64(n * (20 + 8 + 50)); !ok || rec.VLAN != c.vlans[0] || rec.Packets != n || rec.Bytes != want {
			t.Errorf("tags %v (qinq %v): record %+v, want VLAN %d, %d packets, %d bytes", c.vlans, c.qinq, rec, c.vlans[0], n, want)
		}
	}
}

// netInterfaceIndex returns the index of the named interface in the
// calling thread's namespace.
func netInterfaceIndex(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return 0, err
	}
	return ifi.Index, nil
}
