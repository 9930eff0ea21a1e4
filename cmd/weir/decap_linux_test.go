//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/testhost"
)

// TestLiveDecapVXLAN: two test hosts joined by a kernel VXLAN over their
// veth pair, an overlay address on each end (as pods on two nodes); weir
// captures one host's veth live with --decap vxlan and reports the overlay
// flow — its exact datagrams, inner IP bytes — with the hosts' veth
// addresses as tunnel endpoints, the sender's on the initiator's side.
func TestLiveDecapVXLAN(t *testing.T) {
	pr := testhost.NewPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Overlay addresses from the testhost's IPv6 range, in a /64 neither
	// Pairs nor Nets use.
	overlay := [2]netip.Addr{netip.MustParseAddr("fd00:77ee:8000::1"), netip.MustParseAddr("fd00:77ee:8000::2")}
	hosts := [2]*testhost.Host{pr.A, pr.B}
	for i, h := range hosts {
		peer := hosts[1-i]
		for _, args := range [][]string{
			{"link", "add", "vxw", "type", "vxlan", "id", "42", "local", h.Addr4.String(), "remote", peer.Addr4.String(), "dstport", "4789", "dev", h.Iface},
			{"addr", "add", overlay[i].String() + "/64", "dev", "vxw", "nodad"},
			{"link", "set", "vxw", "up"},
		} {
			if out, err := h.Exec(ctx, "ip", args...); err != nil {
				if os.Getenv("CI") == "" && strings.Contains(string(out), "vxlan") {
					t.Skipf("no VXLAN in this kernel: %s", out)
				}
				t.Fatalf("ip %v in %s: %v\n%s", args, h.Name, err, out)
			}
		}
	}
	bin := buildWeir(t)
	cmd, stdout, stderr := startLive(t, pr.B, bin, "-o", "json", "--decap", "vxlan", "--data-dir", "off")

	// B listens on its overlay address; A sends a warm-up datagram from
	// another port until one arrives (neighbour discovery through the
	// tunnel), then n datagrams, all of which B must receive.
	const n, size, port = 200, 120, 43222
	var got int
	var srcPort uint16
	err := pr.B.Do(func() error {
		rc, err := net.ListenUDP("udp6", &net.UDPAddr{IP: overlay[1].AsSlice(), Port: port})
		if err != nil {
			return err
		}
		defer rc.Close()
		return pr.A.Do(func() error {
			warm, err := net.DialUDP("udp6", nil, &net.UDPAddr{IP: overlay[1].AsSlice(), Port: port})
			if err != nil {
				return err
			}
			defer warm.Close()
			buf := make([]byte, 2048)
			for i := 0; ; i++ {
				if i == 100 {
					return errors.New("no warm-up datagram crossed the tunnel in 100 tries")
				}
				warm.Write([]byte("warm-up"))
				rc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
				if _, err := rc.Read(buf); err == nil {
					break
				}
			}
			c, err := net.DialUDP("udp6", &net.UDPAddr{IP: overlay[0].AsSlice()}, &net.UDPAddr{IP: overlay[1].AsSlice(), Port: port})
			if err != nil {
				return err
			}
			defer c.Close()
			srcPort = uint16(c.LocalAddr().(*net.UDPAddr).Port)
			payload := make([]byte, size)
			for i := 0; i < n; i++ {
				if _, err := c.Write(payload); err != nil {
					return err
				}
			}
			rc.SetReadDeadline(time.Now().Add(20 * time.Second))
			for got < n {
				k, from, err := rc.ReadFromUDP(buf)
				if err != nil {
					return err
				}
				if from.Port == int(srcPort) && k == size {
					got++
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatalf("traffic through the tunnel: %v (%d of %d received)", err, got, n)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("weir exited with %v\n%s", err, stderr.String())
	}
	found := false
	sc := bufio.NewScanner(strings.NewReader(stdout.String()))
	for sc.Scan() {
		var r jsonRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record %q: %v", sc.Text(), err)
		}
		if r.SrcIP != overlay[0].String() || r.DstIP != overlay[1].String() || r.SrcPort != srcPort {
			continue
		}
		found = true
		if r.Packets != n || r.Bytes != n*(40+8+size) || r.DstPort != port || r.TunnelSrc != pr.A.Addr4.String() || r.TunnelDst != pr.B.Addr4.String() {
			t.Errorf("overlay flow %+v: want %d packets, %d inner bytes, tunnel %s → %s", r, n, n*(40+8+size), pr.A.Addr4, pr.B.Addr4)
		}
	}
	if !found {
		t.Fatalf("no record of the overlay flow %s:%d → %s:%d:\n%s\n%s", overlay[0], srcPort, overlay[1], port, stdout.String(), stderr.String())
	}
}
