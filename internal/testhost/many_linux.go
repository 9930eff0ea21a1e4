//go:build linux

package testhost

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// ManyUDP sends n concurrent UDP flows from a to b's port: flow i leaves
// from source port base+i and sends i%3+1 datagrams of 20+i%200 bytes.
// Flows go in waves of up to 4,096 open sockets, a datagram of each in
// turn, so the packets of many flows interleave. It returns the expected
// packets and IP bytes per source port: what a's sockets sent, whether or
// not b received it all (b's socket may overflow; b's interface still
// saw every packet a sent). n ≤ 30,000 and base+n ≤ 65,536.
func ManyUDP(t testing.TB, a, b *Host, v6 bool, port, base, n int) map[uint16][2]uint64 {
	t.Helper()
	if n < 1 || n > 30000 || base < 1024 || base+n > 65536 {
		t.Fatalf("testhost: ManyUDP: %d flows from port %d out of range", n, base)
	}
	_, src, dst := family(a, b, v6)
	af, hdr := unix.AF_INET, 20
	if v6 {
		af, hdr = unix.AF_INET6, 40
	}
	sockaddr := func(ip netip.Addr, p int) unix.Sockaddr {
		if v6 {
			return &unix.SockaddrInet6{Port: p, Addr: ip.As16()}
		}
		return &unix.SockaddrInet4{Port: p, Addr: ip.As4()}
	}
	var rfd int
	if err := b.Do(func() (err error) {
		if rfd, err = unix.Socket(af, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		return unix.Bind(rfd, sockaddr(dst, port))
	}); err != nil {
		t.Fatalf("testhost: ManyUDP: receiver: %v", err)
	}
	defer unix.Close(rfd)
	want := make(map[uint16][2]uint64, n)
	payload := make([]byte, 220)
	to := sockaddr(dst, port)
	const wave = 4096
	for w := 0; w < n; w += wave {
		fds := make([]int, 0, wave)
		err := a.Do(func() error {
			for i := w; i < min(w+wave, n); i++ {
				fd, err := unix.Socket(af, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					return err
				}
				fds = append(fds, fd)
				if err := unix.Bind(fd, sockaddr(src, base+i)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			closeAll(fds)
			t.Fatalf("testhost: ManyUDP: sockets: %v", err)
		}
		for round := range 3 {
			for j, fd := range fds {
				i := w + j
				if round >= i%3+1 {
					continue
				}
				size := 20 + i%200
				if err := unix.Sendto(fd, payload[:size], 0, to); err != nil {
					closeAll(fds)
					t.Fatalf("testhost: ManyUDP: flow %d: %v", i, err)
				}
				c := want[uint16(base+i)]
				want[uint16(base+i)] = [2]uint64{c[0] + 1, c[1] + uint64(hdr+8+size)}
			}
			drain(rfd) // keep b's socket from filling, best effort
		}
		closeAll(fds)
	}
	return want
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// drain reads what b's socket has queued, without waiting.
func drain(fd int) {
	buf := make([]byte, 512)
	for {
		if _, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT); err != nil {
			return
		}
	}
}
