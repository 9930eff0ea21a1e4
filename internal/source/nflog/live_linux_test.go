//go:build linux

package nflog

import (
	"context"
	"errors"
	"flag"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/testhost"
)

// capture rewrites testdata/real.bin from a live kernel:
// go test -run TestLiveDeny -capture ./internal/source/nflog
var capture = flag.Bool("capture", false, "rewrite testdata/real.bin with NFLOG messages captured from the kernel")

// TestLiveDeny drops and logs UDP (IPv4, IPv6) and TCP SYNs in host B of a
// test pair and checks the deny flows read from NFLOG group 5: exact
// packets and IP bytes per flow (beyond the 128-byte copy range), the
// prefix as the kernel sends it, hook and input interface, no losses.
func TestLiveDeny(t *testing.T) {
	testhost.Skip(t)
	nft := testhost.Need(t, "nft", "nftables")
	pr := testhost.NewPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rules := `add table inet weirnflog
add chain inet weirnflog in { type filter hook input priority 0 ; }
add rule inet weirnflog in udp dport 7777 log prefix "weir-deny " group 5 drop
add rule inet weirnflog in tcp dport 7778 counter log prefix "weir-tcp" group 5 drop`
	if out, err := pr.B.Exec(ctx, nft, rules); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	var inIf uint32
	if err := pr.B.Do(func() error {
		ifc, err := net.InterfaceByName(pr.B.Iface)
		if err == nil {
			inIf = uint32(ifc.Index)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Config{Netns: pr.B.Do, Group: 5, ReadTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A second socket cannot take the same group.
	if s2, err := Open(Config{Netns: pr.B.Do, Group: 5}); err == nil {
		s2.Close()
		t.Error("a second socket bound group 5")
	}

	const n4, n6, size = 10, 7, 300
	sport4 := testhost.SendDatagrams(t, pr.A, netip.AddrPortFrom(pr.B.Addr4, 7777), n4, size)
	sport6 := testhost.SendDatagrams(t, pr.A, netip.AddrPortFrom(pr.B.Addr6, 7777), n6, size)
	// A TCP connect to a dropped port: the SYN at 0 s and its retransmission
	// at 1 s (initial RTO) fall inside the 2.2 s timeout. How many SYNs
	// the rule dropped is read from its nft counter, not assumed: on a
	// loaded machine the retransmit timer and the dial timeout race.
	err = pr.A.Do(func() error {
		d := net.Dialer{Timeout: 2200 * time.Millisecond, LocalAddr: &net.TCPAddr{IP: pr.A.Addr4.AsSlice()}}
		c, err := d.Dial("tcp", netip.AddrPortFrom(pr.B.Addr4, 7778).String())
		if err == nil {
			c.Close()
			return errors.New("connect to a dropped port succeeded")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	syns := droppedSYNs(ctx, t, pr.B, nft)

	var flows []DenyFlow
	agg := NewAggregator(AggregatorConfig{}, func(f *DenyFlow) { flows = append(flows, *f) })
	var raw []byte
	var prefixes = map[string]int{}
	var hooks = map[uint8]int{}
	var p Packet
	var d Decoder
	// The kernel batches NFLOG messages (flushed within a second): read
	// until every dropped packet's message is in, or 20 s have passed, and
	// then until the socket is quiet (nothing more may come).
	deadline := time.Now().Add(20 * time.Second)
	seen := 0
	for {
		err := s.Read(func(msg []byte) error {
			seen++
			raw = append(raw, msg...)
			if err := d.Decode(&p, msg); err != nil {
				return err
			}
			prefixes[string(p.Prefix)]++
			hooks[p.Hook]++
			return agg.Message(msg, time.Now().UnixNano())
		})
		if errors.Is(err, ErrTimeout) {
			if time.Now().After(deadline) {
				break
			}
			if seen >= n4+n6+int(syns) {
				// A SYN still in the veth's backlog at the first reading
				// shows in the counter now: read on for its message.
				again := droppedSYNs(ctx, t, pr.B, nft)
				if again == syns {
					break
				}
				syns = again
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	agg.Flush()
	t.Logf("prefixes %v, hooks %v, socket %+v, aggregator %+v", prefixes, hooks, s.Stats(), agg.Stats)
	if *capture {
		if err := os.WriteFile(filepath.Join("testdata", "real.bin"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote testdata/real.bin (%d bytes)", len(raw))
	}
	if st := s.Stats(); st.ENOBUFS != 0 || agg.Stats.SeqGaps != 0 || agg.Stats.Errors != [NumReasons]uint64{} {
		t.Errorf("losses or errors: socket %+v, aggregator %+v", st, agg.Stats)
	}
	if hooks[1] != n4+n6+int(syns) || len(hooks) != 1 {
		t.Errorf("hooks %v, want all %d on NF_INET_LOCAL_IN (1)", hooks, n4+n6+int(syns))
	}

	type want struct {
		src, dst         netip.Addr
		sport, dport     uint16
		proto            uint8
		prefix           string
		packets, ipBytes uint64
	}
	wants := []want{
		{pr.A.Addr4, pr.B.Addr4, sport4, 7777, flow.ProtoUDP, "weir-deny ", n4, n4 * (20 + 8 + size)},
		{pr.A.Addr6, pr.B.Addr6, sport6, 7777, flow.ProtoUDP, "weir-deny ", n6, n6 * (40 + 8 + size)},
		// Linux SYNs carry 20 bytes of options (MSS, SACK-permitted,
		// timestamps, window scale): 20 + 40 IP bytes each.
		{pr.A.Addr4, pr.B.Addr4, 0, 7778, // source port: any (the dialer picks it)
			flow.ProtoTCP, "weir-tcp", syns, syns * 60},
	}
	if len(flows) != len(wants) {
		t.Fatalf("%d deny flows, want %d: %+v", len(flows), len(wants), flows)
	}
	for _, w := range wants {
		var got *DenyFlow
		for i := range flows {
			f := &flows[i]
			k := f.Key
			if netip.AddrFrom16(k.SrcAddr).Unmap() == w.src && netip.AddrFrom16(k.DstAddr).Unmap() == w.dst &&
				k.DstPort == w.dport && k.Proto == w.proto && (w.sport == 0 || k.SrcPort == w.sport) {
				got = f
			}
		}
		if got == nil {
			t.Errorf("no deny flow %v -> %v:%d proto %d in %+v", w.src, w.dst, w.dport, w.proto, flows)
			continue
		}
		if got.Packets != w.packets || got.Bytes != w.ipBytes || got.Prefix != w.prefix || got.Group != 5 ||
			got.Verdict != VerdictDeny || got.End != EndFlush || got.InIf != inIf || got.OutIf != 0 || got.Hook != 1 ||
			got.First > got.Last || got.First == 0 {
			t.Errorf("deny flow %v -> %v:%d: got %+v, want %d packets, %d bytes, prefix %q, in %d",
				w.src, w.dst, w.dport, got, w.packets, w.ipBytes, w.prefix, inIf)
		}
	}
}

// droppedSYNs reads the packets the TCP rule's counter saw in h.
func droppedSYNs(ctx context.Context, t *testing.T, h *testhost.Host, nft string) uint64 {
	t.Helper()
	out, err := h.Exec(ctx, nft, "list chain inet weirnflog in")
	if err != nil {
		t.Fatalf("nft list: %v: %s", err, out)
	}
	m := regexp.MustCompile(`tcp dport 7778 counter packets (\d+) bytes`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no counter on the tcp rule in:\n%s", out)
	}
	n, err := strconv.ParseUint(string(m[1]), 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("tcp rule counter %q: %v", m[1], err)
	}
	return n
}
