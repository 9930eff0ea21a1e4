package pcapfilter

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// diffExprs are the expressions of the differential test. eth/raw say on
// which link types they are compared (primitives that need an Ethernet
// header are errors on raw links here, a "match nothing" in libpcap).
var diffExprs = []struct {
	expr     string
	eth, raw bool
}{
	{"ip", true, true}, {"ip6", true, true}, {"tcp", true, true}, {"udp", true, true},
	{"icmp", true, true}, {"icmp6", true, true}, {"sctp", true, true}, {"igmp", true, true},
	{"ah", true, true}, {"esp", true, true}, {"pim", true, true}, {"vrrp", true, true},
	{"host 1.2.3.4", true, true}, {"src host 1.2.3.4", true, true}, {"dst host 10.0.0.1", true, true},
	{"host 1.2.3.4 or 5.6.7.8", true, true}, {"src or dst host 10.1.2.3", true, true},
	{"src and dst host 1.2.3.4", true, true}, {"ip host 10.0.0.1", true, true}, {"host ::1", true, true},
	{"ip6 host 2001:db8::1", true, true}, {"ip6 src host fe80::1", true, true}, {"dst host ff02::1", true, true},
	{"net 10.0.0.0/8", true, true}, {"src net 10.1.0.0/16", true, true},
	{"dst net 192.168.0.0 mask 255.255.0.0", true, true}, {"net 10", true, true}, {"net 10.1", true, true},
	{"net 2001:db8::/32", true, true}, {"ip6 net fe80::/10", true, true}, {"net 0.0.0.0/0", true, true},
	{"ip6 net ::/0", true, true}, {"src net 10.0.0.0/8 and dst net 1.0.0.0/8", true, true},
	{"port 80", true, true}, {"port 53", true, true}, {"tcp port 80", true, true}, {"udp port 53", true, true},
	{"sctp port 80", true, true}, {"tcp src port 443", true, true}, {"udp dst port 123", true, true},
	{"port 80 or 443", true, true}, {"tcp port 80 or 443 or 8080", true, true}, {"portrange 10-20", true, true},
	{"tcp portrange 1-1024", true, true}, {"udp portrange 5000-6000", true, true}, {"src portrange 20-15", true, true},
	{"port http", true, true}, {"port domain", true, true}, {"port ssh", true, true}, {"tcp port https", true, true},
	{"udp port ntp", true, true}, {"port https or domain", true, true}, {"dst port 65535 or src port 0", true, true},
	{"ip proto 6", true, true}, {"ip6 proto 17", true, true}, {"proto 1", true, true}, {`ip proto \tcp`, true, true},
	{"proto gre", true, true}, {"ip6 proto 44", true, true}, {"ip proto 6 or 17", true, true},
	{"tcp[tcpflags] & (tcp-syn|tcp-fin) != 0", true, true}, {"tcp[13] & 2 != 0", true, true},
	{"tcp[tcpflags] & tcp-syn != 0 and tcp[tcpflags] & tcp-ack = 0", true, true},
	{"icmp[icmptype] = icmp-echo", true, true},
	{"icmp[icmptype] != icmp-echo and icmp[icmptype] != icmp-echoreply", true, true},
	{"ip[6:2] & 0x1fff = 0", true, true}, {"ip[9] = 6", true, true}, {"ip[0] & 0xf > 5", true, true},
	{"ip[2:2] > 100", true, true}, {"udp[0:2] = 53", true, true}, {"tcp[2:2] = 80 or tcp[0:2] = 80", true, true},
	{"icmp6[icmp6type] = icmp6-echo", true, true}, {"icmp6[0] = 128", true, true}, {"ip6[6] = 6", true, true},
	{"len > 100", true, true}, {"len <= 64", true, true}, {"len >= 60 and len < 200", true, true},
	{"less 100", true, true}, {"greater 500", true, true}, {"len - 14 > 50", true, true},
	{"ip[2:2] - ((ip[0]&0xf)<<2) > 40", true, true}, {"tcp[((tcp[12]&0xf0)>>4)*4:1] = 0x41", true, true},
	{"ip[ip[0]&0xf] = 0", true, true}, {"1 = 1", true, true}, {"ip[0] % 16 = 5", true, true},
	{"ip[1] ^ 0xff = 0xff", true, true}, {"-ip[0] != 0", true, true}, {"len * 2 / 4 >= 40", true, true},
	{"ip[8] < 64", true, true}, {"ip[0] = 0x40 + 13 % 4 * 2 - 1", true, true}, {"udp[4:2] = ip[2:2] - 20", true, true},
	{"tcp[0:4] = tcp[0:4]", true, true}, {"ip[16:4] = ip[12:4] + 0 or ip[12:4] > ip[16:4]", true, true},
	{"not tcp", true, true}, {"not (tcp or udp)", true, true}, {"tcp and not port 22", true, true},
	{"ip and (tcp or udp) and not port 53", true, true}, {"not port 80 and 443", true, true},
	{"host 1.2.3.4 and port 80 or 8080", true, true}, {"(ip or ip6) and not icmp", true, true},
	{"! ip6 && (udp || icmp)", true, true}, {"port 80 and (tcp) or 443", true, true},
	{"port (80 or 443)", true, true}, {"host (1.2.3.4 or 5.6.7.8) and tcp", true, true},
	{"port 80 and not 443", true, true}, {"tcp port ssh or domain", true, true},
	{"not not not udp", true, true}, {"udp and (port 53 or (src net 10.0.0.0/8 and not dst port 5353))", true, true},
	{"host 167772161", true, true}, {"tcp[0:2] > tcp[2:2]", true, true}, {"len > ip[2:2] + 14", true, false},
	{"icmp6 and ip6[40] = 128", true, true}, {"udp[8:2] = 0x4142 or tcp[20:2] = 0x4142", true, true},
	{"ip6 proto 6 or 17 or 58", true, true}, {"ip[ip[0] & 0xf:1] & 0x40 = 0x40", true, true},
	{"ip multicast", true, true}, {"ip6 multicast", true, true}, {"ip broadcast", true, true},
	{"arp", true, false}, {"rarp", true, false}, {"arp host 10.0.0.1", true, false},
	{"rarp src 1.2.3.4", true, false}, {"ether host 02:00:01:02:03:04", true, false},
	{"ether src 02:00:0a:00:00:01", true, false}, {"ether dst ff:ff:ff:ff:ff:ff", true, false},
	{"broadcast", true, false}, {"multicast", true, false}, {"ether broadcast", true, false},
	{"ether multicast", true, false}, {"ether proto 0x88cc", true, false}, {`ether proto \arp`, true, false},
	{`ether proto \ip6`, true, false}, {"ether proto 0x42", true, false}, {"ether[12:2] = 0x800", true, false},
	{"arp[7] = 1", true, false}, {"ether[0] & 1 != 0 and not broadcast", true, false},
	{"not ip and not ip6", true, false}, {"ether[6:4] = 0x02000a00", true, false}, {"ether src 2:0:a:0:0:1 or arp", true, false},
}

// needTcpdump returns the tcpdump path, or skips (fails under CI=true).
func needTcpdump(t testing.TB) string {
	path, err := exec.LookPath("tcpdump")
	if err != nil {
		msg := "tcpdump (libpcap) not installed: the differential test against libpcap needs it (apt-get install tcpdump)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// emptyPcap writes a pcap file with no packets and the given link type, so
// tcpdump compiles filters for that link type without an interface.
func emptyPcap(t testing.TB, linktype uint32) string {
	hdr := make([]byte, 24)
	binary.LittleEndian.PutUint32(hdr[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(hdr[4:], 2)
	binary.LittleEndian.PutUint16(hdr[6:], 4)
	binary.LittleEndian.PutUint32(hdr[16:], DefaultSnaplen)
	binary.LittleEndian.PutUint32(hdr[20:], linktype)
	path := filepath.Join(t.TempDir(), fmt.Sprintf("empty-%d.pcap", linktype))
	if err := os.WriteFile(path, hdr, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// libpcapProgram compiles expr with tcpdump -ddd (optimized, or with -O
// unoptimized) and parses its "op jt jf k" lines.
func libpcapProgram(tcpdump, pcapFile, expr string, optimize bool) ([]Instruction, error) {
	args := []string{"-ddd", "-r", pcapFile}
	if !optimize {
		args = append(args, "-O")
	}
	args = append(args, "--", expr)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(tcpdump, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("tcpdump %q: %v: %s", expr, err, strings.TrimSpace(stderr.String()))
	}
	sc := bufio.NewScanner(&stdout)
	var n int
	var prog []Instruction
	for first := true; sc.Scan(); first = false {
		if first {
			if _, err := fmt.Sscan(sc.Text(), &n); err != nil {
				return nil, fmt.Errorf("tcpdump %q: bad count line %q", expr, sc.Text())
			}
			continue
		}
		var ins Instruction
		if _, err := fmt.Sscan(sc.Text(), &ins.Op, &ins.Jt, &ins.Jf, &ins.K); err != nil {
			return nil, fmt.Errorf("tcpdump %q: bad line %q", expr, sc.Text())
		}
		prog = append(prog, ins)
	}
	if len(prog) != n || n == 0 {
		return nil, fmt.Errorf("tcpdump %q: %d instructions, header says %d", expr, len(prog), n)
	}
	return prog, nil
}

// TestDifferentialLibpcap compiles each expression with this package and
// with libpcap (tcpdump -ddd, optimized and unoptimized) and requires the
// same verdict for every corpus frame.
func TestDifferentialLibpcap(t *testing.T) {
	tcpdump := needTcpdump(t)
	links := []struct {
		link     LinkType
		linktype uint32
		corpus   []testFrame
	}{
		{LinkEthernet, 1, ethernetCorpus()},
		{LinkRaw, 101, rawCorpus()},
	}
	compared, libpcapSelf := 0, 0
	for _, l := range links {
		file := emptyPcap(t, l.linktype)
		for _, e := range diffExprs {
			if l.link == LinkEthernet && !e.eth || l.link == LinkRaw && !e.raw {
				continue
			}
			ours, err := Compile(e.expr, l.link, 0)
			if err != nil {
				t.Errorf("%v %q: %v", l.link, e.expr, err)
				continue
			}
			opt, err := libpcapProgram(tcpdump, file, e.expr, true)
			if err != nil {
				t.Errorf("%v: %v", l.link, err)
				continue
			}
			unopt, err := libpcapProgram(tcpdump, file, e.expr, false)
			if err != nil {
				t.Errorf("%v: %v", l.link, err)
				continue
			}
			accepted, bad := 0, 0
			for _, f := range l.corpus {
				got, err1 := run(ours, f.data, f.m)
				want, err2 := run(opt, f.data, f.m)
				raw, err3 := run(unopt, f.data, f.m)
				if err1 != nil || err2 != nil || err3 != nil {
					t.Fatalf("%v %q: interpreter: ours %v, libpcap %v, %v", l.link, e.expr, err1, err2, err3)
				}
				if got != 0 {
					accepted++
				}
				compared++
				// libpcap's optimizer drops dead loads (e.g. of a /0 mask), so
				// on truncated frames its optimized and unoptimized programs
				// can disagree; we follow the optimized one, what users get.
				if (want != 0) != (raw != 0) {
					libpcapSelf++
				}
				if (got != 0) != (want != 0) || (want != 0) == (raw != 0) && (got != 0) != (raw != 0) {
					if bad++; bad <= 3 {
						t.Errorf("%v %q: %s frame (%d bytes) % x: ours %d, libpcap %d (unoptimized %d)\nours:\n%slibpcap:\n%s",
							l.link, e.expr, f.desc, len(f.data), f.data[:min(len(f.data), 64)], got, want, raw, disasm(ours), disasm(opt))
					}
				}
			}
			if (accepted == 0 || accepted == len(l.corpus)) && e.expr != "1 = 1" {
				t.Errorf("%v %q: accepts %d of %d frames: the corpus does not exercise it", l.link, e.expr, accepted, len(l.corpus))
			}
			if err := reachable(ours); err != nil {
				t.Errorf("%v %q: %v", l.link, e.expr, err)
			}
			t.Logf("%v %-60q accepts %4d of %d frames", l.link, e.expr, accepted, len(l.corpus))
		}
	}
	t.Logf("%d verdicts compared; on %d libpcap's optimized and unoptimized programs disagreed (we match the optimized one)", compared, libpcapSelf)
}
