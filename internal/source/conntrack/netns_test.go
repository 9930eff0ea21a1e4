package conntrack

import "testing"

// TestNetnsString: the start line's name of a namespace, with a name
// from /run/netns escaped when it could drive a terminal.
func TestNetnsString(t *testing.T) {
	for _, c := range []struct {
		n    Netns
		want string
	}{
		{Netns{Inode: 4026531840, Initial: true}, "the host's namespace (net:[4026531840])"},
		{Netns{Inode: 4026532177, Name: "blue"}, "namespace blue (net:[4026532177])"},
		{Netns{Inode: 4026532177}, "namespace net:[4026532177]"},
		{Netns{Inode: 7, Name: "a\x1b[31mred"}, `namespace "a\x1b[31mred" (net:[7])`},
		{Netns{Inode: 7, Name: "two words"}, `namespace "two words" (net:[7])`},
		{Netns{}, "an unidentified namespace"},
	} {
		if got := c.n.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.n, got, c.want)
		}
	}
}

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
