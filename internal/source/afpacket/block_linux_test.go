//go:build linux

package afpacket

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/meter"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
)

// seen is one frame a walk handed over, with Data as its place in the
// block (offset, length, capacity) and its bytes.
type seen struct {
	off, n, cap int
	data        string
	wire        int
	time        int64
	vlan        uint16
	hasVLAN     bool
	link        packet.LinkType
	iface       string
}

// walked is a taker that records every frame relative to block blk.
type walked struct {
	blk    []byte
	frames []seen
}

func (c *walked) take(f *source.Frame) { c.frames = append(c.frames, c.seen(f)) }

func (c *walked) seen(f *source.Frame) seen {
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(f.Data))) - uintptr(unsafe.Pointer(&c.blk[0])))
	if len(f.Data) == 0 && cap(f.Data) == 0 {
		off = -1 // an empty slice at the block's end may point one past it
	}
	return seen{off: off, n: len(f.Data), cap: cap(f.Data), data: string(f.Data), wire: f.WireLen, time: f.Time,
		vlan: f.VLAN, hasVLAN: f.HasVLAN, link: f.Link, iface: f.Iface}
}

// heldBlock is a Source over a one-block ring holding blk, as acquire
// leaves it: num_pkts frames left, the first at offset_to_first_pkt.
func heldBlock(blk []byte, skipOut bool) *Source {
	s := &Source{ring: blk, blockSize: len(blk), numBlocks: 1, held: true, skipOut: skipOut,
		link: packet.LinkEthernet, iface: "veth0"}
	s.left = int(ne.Uint32(blk[blkNumPkts:]))
	s.off = int(ne.Uint32(blk[blkFirstPkt:]))
	return s
}

// compareWalks walks a copy of blk with walk and another copy one frame at a
// time with Source.frame (the path of Set.Next), and fails unless both see
// the same frames at the same places and count the same corrupt headers.
func compareWalks(t *testing.T, blk []byte, skipOut bool) []seen {
	t.Helper()
	a, b := slices.Clone(blk), slices.Clone(blk)
	old := heldBlock(a, skipOut)
	oc := &walked{blk: a}
	var f source.Frame
	for steps := 0; old.left > 0; steps++ {
		if steps > len(a) {
			t.Fatal("Source.frame did not finish the block")
		}
		if old.frame(&f) {
			oc.take(&f)
		}
	}
	nw := heldBlock(b, skipOut)
	nc := &walked{blk: b}
	nw.walk(&f, nc)
	if nw.left != 0 || !nw.held {
		t.Fatalf("after walk: left %d held %v, want 0 and still held", nw.left, nw.held)
	}
	if !slices.Equal(oc.frames, nc.frames) {
		t.Fatalf("frames differ:\nframe: %+v\nwalk:  %+v", oc.frames, nc.frames)
	}
	if o, n := old.corrupt.Load(), nw.corrupt.Load(); o != n {
		t.Fatalf("corrupt: frame counted %d, walk %d", o, n)
	}
	return nc.frames
}

// frameSpec is one tpacket3_hdr to write into a crafted block.
type frameSpec struct {
	next, snap, wire uint32
	mac              uint16
	status           uint32
	tci              uint32
	pktType          byte
	data             string // written at mac; may be shorter than snap
}

// craftBlock builds a block of size bytes: block header with n frames (len(fs)
// unless n >= 0) starting at first, then each frame at the offset the
// previous one's next names.
func craftBlock(size, n int, first uint32, fs []frameSpec) []byte {
	blk := make([]byte, size)
	if n < 0 {
		n = len(fs)
	}
	ne.PutUint32(blk[blkStatus:], unix.TP_STATUS_USER)
	ne.PutUint32(blk[blkNumPkts:], uint32(n))
	ne.PutUint32(blk[blkFirstPkt:], first)
	off := int(first)
	for i, f := range fs {
		if off < 0 || off+frHdrBytes > size {
			break
		}
		h := blk[off:]
		ne.PutUint32(h[frNextOff:], f.next)
		ne.PutUint32(h[frSec:], uint32(1_700_000_000+i))
		ne.PutUint32(h[frNsec:], uint32(1000*i+7))
		ne.PutUint32(h[frSnaplen:], f.snap)
		ne.PutUint32(h[frLen:], f.wire)
		ne.PutUint32(h[frStatus:], f.status)
		ne.PutUint16(h[frMac:], f.mac)
		ne.PutUint32(h[frVlanTCI:], f.tci)
		h[frPktType] = f.pktType
		if m := off + int(f.mac); m < size {
			copy(blk[m:], f.data)
		}
		off += int(f.next)
	}
	return blk
}

// TestWalkMatchesFrame: on crafted blocks (good frames, VLAN tags, outgoing
// copies, snap-length cuts, headers pointing outside the block, next
// offsets of 0 and short ones, num_pkts larger than the frames there)
// walk hands over exactly the frames Source.frame does, in order, and
// counts the same corrupt headers.
func TestWalkMatchesFrame(t *testing.T) {
	const size = 4096
	good := func(i int) frameSpec {
		d := fmt.Sprintf("frame-%02d-payload", i)
		return frameSpec{next: 192, snap: uint32(len(d)), wire: uint32(len(d) + 40), mac: 82, data: d}
	}
	goods := func(n int) []frameSpec {
		var fs []frameSpec
		for i := range n {
			fs = append(fs, good(i))
		}
		return fs
	}
	vlan := good(1)
	vlan.status, vlan.tci = unix.TP_STATUS_VLAN_VALID, 0x2064
	out := good(2)
	out.pktType = pktOutgoing
	cut := good(3)
	cut.snap, cut.wire = 5, 1500 // snap-length cut: WireLen stays the wire's
	zeroSnap := good(4)
	zeroSnap.snap = 0
	tail := good(5)
	tail.snap = size // runs past the block
	lowMac := good(6)
	lowMac.mac = 10 // data would overlap the header
	zeroNext := good(7)
	zeroNext.next = 0
	shortNext := good(8)
	shortNext.next = frHdrBytes - 1
	oddNext := good(9)
	oddNext.next = frHdrBytes + 3 // unaligned, but past the header: followed
	huge := good(10)
	huge.next = 1 << 31

	cases := []struct {
		name    string
		blk     []byte
		skipOut bool
		want    int // frames handed over
	}{
		{"good", craftBlock(size, -1, blkHdrLen, goods(16)), false, 16},
		{"empty", craftBlock(size, 0, blkHdrLen, nil), false, 0},
		{"vlan and outgoing kept", craftBlock(size, -1, blkHdrLen, []frameSpec{good(0), vlan, out, good(3)}), false, 4},
		{"outgoing skipped", craftBlock(size, -1, blkHdrLen, []frameSpec{good(0), out, good(2)}), true, 2},
		{"outgoing last skipped", craftBlock(size, -1, blkHdrLen, []frameSpec{good(0), out}), true, 1},
		{"snap cut", craftBlock(size, -1, blkHdrLen, []frameSpec{good(0), cut, zeroSnap, good(3)}), false, 4},
		{"data past the block", craftBlock(size, -1, blkHdrLen, []frameSpec{good(0), tail, good(2)}), false, 1},
		{"mac inside the header", craftBlock(size, -1, blkHdrLen, []frameSpec{lowMac, good(1)}), false, 0},
		{"next 0", craftBlock(size, -1, blkHdrLen, []frameSpec{good(0), zeroNext, good(2)}), false, 2},
		{"next 0 on the last frame", craftBlock(size, -1, blkHdrLen, []frameSpec{good(0), zeroNext}), false, 2},
		{"next short", craftBlock(size, -1, blkHdrLen, []frameSpec{shortNext, good(1)}), false, 1},
		{"next odd", craftBlock(size, -1, blkHdrLen, []frameSpec{oddNext, good(1), good(2)}), false, 3},
		{"next past the block", craftBlock(size, -1, blkHdrLen, []frameSpec{good(0), huge, good(2)}), false, 2},
		{"num_pkts beyond the frames", craftBlock(size, 40, blkHdrLen, goods(3)), false, 3},
		{"first inside the block header", craftBlock(size, -1, 8, goods(2)), false, 0},
		{"first past the block", craftBlock(size, 2, size-10, nil), false, 0},
		{"first at the last header", craftBlock(size, 1, size-frHdrBytes, []frameSpec{{next: 192, mac: frHdrBytes - 12}}), false, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := compareWalks(t, c.blk, c.skipOut)
			if len(got) != c.want {
				t.Fatalf("%d frames, want %d: %+v", len(got), c.want, got)
			}
			for _, f := range got {
				if f.link != packet.LinkEthernet || f.iface != "veth0" {
					t.Fatalf("frame %+v: link or iface not the source's", f)
				}
			}
		})
	}
	// The values of a good frame and a tagged one, field by field.
	got := compareWalks(t, craftBlock(size, -1, blkHdrLen, []frameSpec{good(0), vlan, cut}), false)
	want := []seen{
		{off: blkHdrLen + 82, n: 16, cap: 16, data: "frame-00-payload", wire: 56, time: 1_700_000_000*1e9 + 7},
		{off: blkHdrLen + 192 + 82, n: 16, cap: 16, data: "frame-01-payload", wire: 56, time: 1_700_000_001*1e9 + 1007, vlan: 0x2064, hasVLAN: true},
		{off: blkHdrLen + 384 + 82, n: 5, cap: 5, data: "frame", wire: 1500, time: 1_700_000_002*1e9 + 2007},
	}
	for i := range want {
		want[i].link, want[i].iface = packet.LinkEthernet, "veth0"
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

// FuzzWalk: any block contents, frame count and first offset (the kernel's
// bytes are outside input as far as the walk's bounds go): walk never
// panics or reads outside the block, and hands over exactly what
// Source.frame does.
func FuzzWalk(f *testing.F) {
	f.Add(craftBlock(1024, -1, blkHdrLen, []frameSpec{{next: 192, snap: 20, wire: 60, mac: 82, data: "0123456789abcdefghij"}, {next: 0, snap: 3, wire: 3, mac: 82}}), uint32(2), uint32(blkHdrLen), false)
	f.Add(craftBlock(512, 5, 100, []frameSpec{{next: 61, snap: 1, mac: 48, pktType: pktOutgoing}, {next: 61, snap: 400, mac: 48}}), uint32(5), uint32(100), true)
	f.Fuzz(func(t *testing.T, blk []byte, n, first uint32, skipOut bool) {
		if len(blk) < blkHdrLen || len(blk) > 1<<16 {
			return
		}
		binary.NativeEndian.PutUint32(blk[blkNumPkts:], n%4096) // bounded: every frame costs the old walk a step
		binary.NativeEndian.PutUint32(blk[blkFirstPkt:], first)
		compareWalks(t, blk, skipOut)
	})
}

// udpFrame is an Ethernet/IPv4/UDP frame of flow i with a 64-byte payload:
// the benchmark's datagrams.
func udpFrame(i int) string {
	b := make([]byte, 14+20+8+64)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	copy(ip[12:], []byte{10, 0, byte(i >> 8), byte(i)})
	copy(ip[16:], []byte{10, 1, 0, 1})
	binary.BigEndian.PutUint16(ip[20:], uint16(40000+i/16))
	binary.BigEndian.PutUint16(ip[22:], uint16(9000+i%16))
	binary.BigEndian.PutUint16(ip[24:], 8+64)
	return string(b)
}

// discard is a sink that drops records.
type discard struct{}

func (discard) Write([]flow.Record) error { return nil }
func (discard) Close() error              { return nil }

// BenchmarkWalk times the capture's per-packet path without the kernel:
// walk a 1 MiB block of 64-byte UDP datagrams over 256 flows (frames laid
// out as the kernel lays them, 192 bytes apart) into a meter shard with
// the capture's 64k-flow table. The block stays in cache, so this is the
// CPU of walk, decode and table, not the ring's cache misses. ns/op is
// per frame.
func BenchmarkWalk(b *testing.B) {
	const size, stride = 1 << 20, 192
	var fs []frameSpec
	for i := 0; blkHdrLen+(i+1)*stride <= size; i++ {
		d := udpFrame(i % 256)
		fs = append(fs, frameSpec{next: stride, snap: uint32(len(d)), wire: uint32(len(d)), mac: 82, data: d})
	}
	blk := craftBlock(size, -1, blkHdrLen, fs)
	shard, err := meter.NewShard(meter.ShardConfig{Table: flow.Config{MaxFlows: 65536}}, discard{})
	if err != nil {
		b.Fatal(err)
	}
	r := &ring{shard: shard, iface: shard.Ifaces().Index("veth0")}
	var f source.Frame
	cpu := func() int64 { // process CPU: wall time is meaningless on a shared machine
		var ru unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
		return ru.Utime.Nano() + ru.Stime.Nano()
	}
	b.ResetTimer()
	c0, frames := cpu(), 0
	for frames < b.N {
		s := heldBlock(blk, false)
		s.walk(&f, r)
		shard.Apply()
		frames += len(fs)
	}
	b.ReportMetric(float64(cpu()-c0)/float64(frames), "cpu-ns/frame")
	b.StopTimer()
	if st := shard.Stats(); st.Flows != 256 || st.Decoder.Decoded != r.pkts {
		b.Fatalf("%d flows, %d of %d frames decoded", st.Flows, st.Decoder.Decoded, r.pkts)
	}
}
