//go:build linux

package testhost

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// SendDatagrams sends n datagrams of size bytes from an unbound port in h to
// dst, unconnected (so ICMP errors do not stop it) and paced, counting
// those the kernel refuses at once (a firewall's output drop) as sent:
// they left the socket. It returns the source port.
func SendDatagrams(t testing.TB, h *Host, dst netip.AddrPort, n, size int) uint16 {
	t.Helper()
	var port uint16
	err := h.Do(func() error {
		c, err := net.ListenUDP("udp", nil)
		if err != nil {
			return err
		}
		defer c.Close()
		port = uint16(c.LocalAddr().(*net.UDPAddr).Port)
		buf := make([]byte, size)
		for range n {
			if _, err := c.WriteToUDPAddrPort(buf, dst); err != nil && !errors.Is(err, syscall.EPERM) {
				return err
			}
			time.Sleep(200 * time.Microsecond)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return port
}
