//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/testhost"
)

// TestConntrackCapture runs weir capture --source conntrack --nflog-group
// on the router hub of a test net whose firewall translates a service
// address to a backend host (DNAT and masquerade) and drops and logs UDP
// to port 9. The JSON records must show the UDP exchange through the
// service with exact counts both ways, the service address and the
// backend; the dropped datagrams as one deny flow with the rule's
// prefix; and the store must answer queries on both.
func TestConntrackCapture(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("conntrack and NFLOG need root; CI runs this as root")
	}
	testhost.Skip(t)
	nft := testhost.Need(t, "nft", "nftables")
	n := testhost.NewNet(t, testhost.Router, 2)
	cli, be := n.Hosts[0], n.Hosts[1]
	vip := n.HubAddr(be, false) // the hub's own address: nothing answers on port 80 there
	rules := fmt.Sprintf(`add table inet weirct
add chain inet weirct pre { type nat hook prerouting priority -100 ; }
add chain inet weirct post { type nat hook postrouting priority 100 ; }
add chain inet weirct filt { type filter hook forward priority 0 ; }
add rule inet weirct pre ip daddr %s udp dport 80 dnat ip to %s:8080
add rule inet weirct post oifname %s masquerade
add rule inet weirct filt udp dport 9 log prefix "weir-fw " group 5 drop`, vip, be.Addr4, n.HubIface(be))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := n.Hub.Exec(ctx, nft, rules); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	// Backend: answer each datagram with its first half.
	var srv *net.UDPConn
	if err := be.Do(func() (err error) { srv, err = net.ListenUDP("udp", &net.UDPAddr{Port: 8080}); return err }); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			k, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			srv.WriteToUDPAddrPort(buf[:k/2], from)
		}
	}()

	bin := buildWeir(t)
	dir := t.TempDir()
	var stdout bytes.Buffer
	var stderr testhost.SyncBuffer
	cmd := exec.Command(bin, "capture", "--source", "conntrack", "--netns", n.Hub.Name, "--nflog-group", "5",
		"--ct-poll-interval", "200ms", "-o", "json", "--data-dir", dir, "--metrics-addr", "off", "--stats")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), "reading the conntrack table"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("weir did not start: %s", stderr.String())
		}
	}

	const k, size = 6, 200
	var port uint16
	err := cli.Do(func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(vip, 80)))
		if err != nil {
			return err
		}
		defer c.Close()
		port = uint16(c.LocalAddr().(*net.UDPAddr).Port)
		buf := make([]byte, size)
		for i := range k {
			c.Write(buf)
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if got, err := c.Read(buf); err != nil || got != size/2 {
				return fmt.Errorf("answer %d: %d bytes, %v", i, got, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	const dn, dsize = 12, 50
	dport := testhost.SendDatagrams(t, cli, netip.AddrPortFrom(be.Addr4, 9), dn, dsize)
	time.Sleep(500 * time.Millisecond) // polls, and the NFLOG batch flush
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("weir exited with %v\n%s", err, stderr.String())
	}

	var nat, deny map[string]any
	var natPkts, natRev, natBytes, natRevBytes float64
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record %q: %v", sc.Text(), err)
		}
		switch {
		case r["dst_port"] == float64(80) && r["src_port"] == float64(port):
			nat = r
			natPkts += r["packets"].(float64)
			natRev += r["rev_packets"].(float64)
			natBytes += r["bytes"].(float64)
			natRevBytes += r["rev_bytes"].(float64)
		case r["dst_port"] == float64(9) && r["src_port"] == float64(dport):
			if deny != nil {
				t.Errorf("two deny records: %v and %v", deny, r)
			}
			deny = r
		}
	}
	if nat == nil {
		t.Fatalf("no record of the service exchange in:\n%s\n%s", stdout.String(), stderr.String())
	}
	if natPkts != k || natRev != k || natBytes != k*(28+size) || natRevBytes != k*(28+size/2) ||
		nat["src_ip"] != cli.Addr4.String() || nat["dst_ip"] != vip.String() ||
		nat["nat_dst_ip"] != be.Addr4.String() || nat["nat_dst_port"] != float64(8080) || nat["nat_src_ip"] != vip.String() {
		t.Errorf("service record %v (totals %v/%v packets, %v/%v bytes); want %d/%d packets, %d/%d bytes, %s → %s:80 translated to %s → %s:8080",
			nat, natPkts, natRev, natBytes, natRevBytes, k, k, k*(28+size), k*(28+size/2), cli.Addr4, vip, vip, be.Addr4)
	}
	if deny == nil || deny["packets"] != float64(dn) || deny["bytes"] != float64(dn*(28+dsize)) || deny["verdict"] != "deny" ||
		deny["rule"] != "weir-fw" || deny["iface"] != n.HubIface(cli) || deny["dst_ip"] != be.Addr4.String() {
		t.Errorf("deny record %v; want %d packets, %d bytes, verdict deny, rule weir-fw, iface %s", deny, dn, dn*(28+dsize), n.HubIface(cli))
	}
	if !strings.Contains(stderr.String(), "nflog       group 5: 12 packets") {
		t.Errorf("--stats: %s", stderr.String())
	}

	// The store answers on both.
	rows := func(args ...string) []map[string]any {
		code, out, errs := runCLI(append([]string{"query", "-d", dir, "-o", "json", "-n", "0"}, args...)...)
		var res struct{ Rows []map[string]any }
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("query %v: exit %d: %s %s", args, code, out, errs)
		}
		return res.Rows
	}
	if r := rows("verdict,rule", "dport", "=", "9"); len(r) != 1 || r[0]["verdict"] != "deny" || r[0]["rule"] != "weir-fw" || r[0]["packets_out"] != float64(dn) {
		t.Errorf("query verdict,rule dport = 9: %v", r)
	}
	if r := rows("nat_dst_ip,nat_dst_port", "dport", "=", "80"); len(r) != 1 || r[0]["nat_dst_ip"] != be.Addr4.String() || r[0]["nat_dst_port"] != float64(8080) || r[0]["packets_out"] != float64(k) {
		t.Errorf("query nat_dst_ip,nat_dst_port dport = 80: %v", r)
	}
}

// TestConntrackUntrackedNamespace runs weir capture --source conntrack
// under ip netns exec in a test host where no rule uses conntrack, with
// a TCP connection established there before the start. The start line
// names the namespace as the kernel sees it (its ip netns name and
// inode, not "the host's namespace"), weir says at its first poll that
// nothing is tracked there and how to fix it, and --stats says it again.
func TestConntrackUntrackedNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("conntrack needs root; CI runs this as root")
	}
	testhost.Skip(t)
	ip := testhost.Need(t, "ip", "iproute2")
	pr := testhost.NewPair(t)
	var ln *net.TCPListener
	if err := pr.B.Do(func() (err error) { ln, err = net.ListenTCP("tcp", &net.TCPAddr{Port: 7600}); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var cc net.Conn
	if err := pr.A.Do(func() (err error) {
		cc, err = net.DialTimeout("tcp", netip.AddrPortFrom(pr.B.Addr4, 7600).String(), 10*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()

	bin := buildWeir(t)
	var stderr testhost.SyncBuffer
	cmd := exec.Command(ip, "netns", "exec", pr.B.Name, bin, "capture", "--source", "conntrack", "--ct-poll-interval", "100ms",
		"-o", "json", "--data-dir", t.TempDir(), "--metrics-addr", "off", "--stats")
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	const said = "no connections tracked in namespace "
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(stderr.String(), said); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("weir did not say the namespace tracks nothing: %s", stderr.String())
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("weir exited with %v\n%s", err, stderr.String())
	}
	out := stderr.String()
	start := "reading the conntrack table of namespace " + pr.B.Name + " (net:["
	if !strings.Contains(out, start) || strings.Contains(out, "host's namespace") {
		t.Errorf("start line: want %q in\n%s", start, out)
	}
	if !strings.Contains(out, said+pr.B.Name+" (net:[") || !strings.Contains(out, "1 TCP connections are established") ||
		!strings.Contains(out, "conntrack   "+said) || !strings.Contains(out, "nft add rule") {
		t.Errorf("want the untracked message naming the namespace, the established connection and the fix, and in --stats:\n%s", out)
	}
}
