package flow

import "net/netip"

// MaxTunnels bounds the distinct (interface, tunnel endpoints) pairs one
// Ifaces registers; packets of further tunnels keep their plain interface
// index (their records carry no tunnel endpoints) and are counted in
// TunnelOverflow.
const MaxTunnels = 16384

// tunnelKey is one tunnel as seen on one interface. a is the outer address
// on the side of the inner flow's lower endpoint (Key.srcLess's order), b
// the other: both directions of a flow name the same tunnel.
type tunnelKey struct {
	a, b [16]byte
	base uint16
	ver  uint8
}

// IndexTunnel returns the index for a packet of interface index base that
// came through a tunnel between the outer addresses src and dst (as in a
// Key, IPv4-mapped when ver is 4), k being the inner packet's key in wire
// orientation. The index names the same interface (Name), and the records
// of flows first seen with it carry the tunnel's endpoints (TunnelSrc on
// the initiator's side). Past MaxTunnels tunnels it returns base.
func (f *Ifaces) IndexTunnel(base uint16, k *Key, src, dst *[16]byte, ver uint8) uint16 {
	tk := tunnelKey{a: *src, b: *dst, base: base, ver: ver}
	if !k.srcLess() {
		tk.a, tk.b = *dst, *src
	}
	if f.lastTunnelOK && f.lastTunnel == tk { // a tunnel's packets come in runs
		return f.lastTunnelIdx
	}
	i, ok := f.byTunnel[tk]
	if !ok {
		if len(f.byTunnel) >= MaxTunnels || len(f.names) >= MaxIfaces-1 || int(base) >= len(f.names) {
			f.tunnelOverflow++
			return base
		}
		if f.byTunnel == nil {
			f.byTunnel = make(map[tunnelKey]uint16)
		}
		i = uint16(len(f.names))
		f.names = append(f.names, f.names[base])
		for len(f.tunnels) < len(f.names)-1 {
			f.tunnels = append(f.tunnels, tunnelKey{})
		}
		f.tunnels = append(f.tunnels, tk)
		f.byTunnel[tk] = i
	}
	f.lastTunnel, f.lastTunnelIdx, f.lastTunnelOK = tk, i, true
	return i
}

// TunnelOverflow counts the packets IndexTunnel could not register a
// tunnel for (more than MaxTunnels).
func (f *Ifaces) TunnelOverflow() uint64 {
	if f == nil {
		return 0
	}
	return f.tunnelOverflow
}

// tunnel returns the endpoints of index i's tunnel oriented as k (a
// record's key: src on k.Src's side), or invalid Addrs for a plain
// interface.
func (f *Ifaces) tunnel(i uint16, k *Key) (src, dst netip.Addr) {
	if f == nil || int(i) >= len(f.tunnels) || f.tunnels[i].ver == 0 {
		return netip.Addr{}, netip.Addr{}
	}
	t := &f.tunnels[i]
	a, b := addr(t.a, t.ver), addr(t.b, t.ver)
	if k.srcLess() {
		return a, b
	}
	return b, a
}
