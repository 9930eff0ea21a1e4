//go:build linux

package conntrack

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/testhost"
)

// TestIdentifyNetns: a test host's namespace is named as ip netns lists
// it, with the inode of its /run/netns file; the test's own namespace has
// the inode /proc/self/ns/net shows.
func TestIdentifyNetns(t *testing.T) {
	testhost.Skip(t)
	pr := testhost.NewPair(t)
	n, err := IdentifyNetns(pr.B.Do)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat("/run/netns/"+pr.B.Name, &st); err != nil {
		t.Fatal(err)
	}
	if n.Name != pr.B.Name || n.Inode != st.Ino || n.Initial {
		t.Errorf("test host: %+v; want name %s, inode %d, not initial", n, pr.B.Name, st.Ino)
	}
	self, err := IdentifyNetns(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		t.Fatal(err)
	}
	if self.Inode != st.Ino || self.Inode == n.Inode {
		t.Errorf("own namespace: %+v; want inode %d", self, st.Ino)
	}
}

// TestSourceUntracked: in a namespace without any rule that uses
// conntrack, its table stays empty while UDP and TCP traffic crosses it;
// the source says so once (naming the namespace and the fix) and flags
// it in its stats. Once a ct rule hooks conntrack in, connections are
// tracked and the flag clears.
func TestSourceUntracked(t *testing.T) {
	testhost.Skip(t)
	nft := testhost.Need(t, "nft", "nftables")
	pr := testhost.NewPair(t)
	echoUDP(t, pr.B, 7500)
	var mu sync.Mutex
	var logs []string
	logf := func(format string, args ...any) {
		mu.Lock()
		logs = append(logs, strings.TrimSpace(sprintf(format, args...)))
		mu.Unlock()
	}
	s, stop := runSource(t, pr.B, SourceConfig{PollInterval: 100 * time.Millisecond, Logf: logf})
	exchange(t, pr.A, netip.AddrPortFrom(pr.B.Addr4, 7500), 20, 100)
	for deadline := time.Now().Add(20 * time.Second); !s.Stats().Untracked; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not flagged untracked within 20 s: stats %+v", s.Stats())
		}
	}
	if st := s.Stats(); st.UntrackedPackets < 2*20 || st.Store.New != 0 {
		t.Errorf("stats %+v; want at least 40 packets seen untracked, no connection", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := pr.B.Exec(ctx, nft, "add table inet weirct; add chain inet weirct c { type filter hook prerouting priority 0 ; } ; add rule inet weirct c ct state new"); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	exchange(t, pr.A, netip.AddrPortFrom(pr.B.Addr4, 7500), 3, 100)
	for deadline := time.Now().Add(20 * time.Second); s.Stats().Untracked; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still flagged untracked 20 s after a ct rule: stats %+v", s.Stats())
		}
	}
	stop()
	mu.Lock()
	defer mu.Unlock()
	var said []string
	for _, l := range logs {
		if strings.HasPrefix(l, "no connections tracked in namespace "+pr.B.Name+" (net:[") {
			said = append(said, l)
		}
	}
	if len(said) != 1 || !strings.Contains(said[0], "nft add rule") {
		t.Errorf("want one message naming the namespace and the fix; logged: %q", logs)
	}
}

// TestSourceTrackedQuiet: where conntrack tracks connections, the source
// never says it does not, even while the table is empty at the start.
func TestSourceTrackedQuiet(t *testing.T) {
	pr := trackedPair(t)
	echoUDP(t, pr.B, 7501)
	var mu sync.Mutex
	var logs []string
	s, stop := runSource(t, pr.B, SourceConfig{PollInterval: 100 * time.Millisecond, Logf: func(f string, a ...any) {
		mu.Lock()
		logs = append(logs, sprintf(f, a...))
		mu.Unlock()
	}})
	exchange(t, pr.A, netip.AddrPortFrom(pr.B.Addr4, 7501), 20, 100)
	for p, deadline := s.Stats().Polls+3, time.Now().Add(20*time.Second); s.Stats().Polls < p; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no polls")
		}
	}
	st := s.Stats()
	stop()
	mu.Lock()
	defer mu.Unlock()
	if st.Untracked || strings.Contains(strings.Join(logs, "\n"), "no connections tracked") {
		t.Errorf("flagged untracked where conntrack tracks: %+v %q", st, logs)
	}
}

// sprintf is fmt.Sprintf.
func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// TestSNMPValue: counters found by name in /proc/net/snmp's header and
// value line pairs and in /proc/net/snmp6's name value lines; missing or
// malformed ones are 0.
func TestSNMPValue(t *testing.T) {
	snmp := []byte("Ip: Forwarding DefaultTTL InReceives ForwDatagrams\nIp: 1 64 100 7\n" +
		"Tcp: RtoAlgorithm CurrEstab InSegs OutSegs\nTcp: 1 3 40 50\nUdp: InDatagrams NoPorts OutDatagrams\nUdp: 9 2 11\n" +
		"UdpLite: InDatagrams\nUdpLite: x\n")
	for _, c := range []struct {
		sect, name string
		want       uint64
	}{
		{"Ip", "ForwDatagrams", 7}, {"Tcp", "CurrEstab", 3}, {"Tcp", "InSegs", 40}, {"Tcp", "OutSegs", 50},
		{"Udp", "InDatagrams", 9}, {"Udp", "OutDatagrams", 11}, {"UdpLite", "InDatagrams", 0}, {"Icmp", "InMsgs", 0},
		{"Tcp", "Nope", 0},
	} {
		if got := snmpValue(snmp, c.sect, c.name); got != c.want {
			t.Errorf("%s %s: %d, want %d", c.sect, c.name, got, c.want)
		}
	}
	if got := snmpValue([]byte("Tcp: CurrEstab InSegs\n"), "Tcp", "InSegs"); got != 0 {
		t.Errorf("header without values: %d", got)
	}
	snmp6 := []byte("Ip6InReceives                   \t12\nUdp6InDatagrams 5\nUdp6OutDatagrams 6\nIp6OutForwDatagrams bad\n")
	for name, want := range map[string]uint64{"Udp6InDatagrams": 5, "Udp6OutDatagrams": 6, "Ip6OutForwDatagrams": 0, "Ip6InReceives": 12, "X": 0} {
		if got := snmp6Value(snmp6, name); got != want {
			t.Errorf("%s: %d, want %d", name, got, want)
		}
	}
}
