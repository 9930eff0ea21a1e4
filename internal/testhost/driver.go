package testhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Bounds of the traffic driver.
const (
	MaxDatagrams    = 1_000_000 // most datagrams one SendUDP sends
	MaxDatagramSize = 65507     // largest UDP payload over IPv4 (65535 - 20 - 8), also used for IPv6
	MaxTCPBytes     = 1 << 34   // most bytes one TCPTransfer sends (16 GiB)
	MaxWriteSize    = 1 << 20   // largest single write in TCPTransfer
	// DefaultTimeout bounds a driver call whose ctx has no deadline.
	DefaultTimeout = 60 * time.Second
)

const (
	udpRcvBuf   = 4 << 20                // requested receive buffer (the kernel caps it at rmem_max)
	udpStall    = 500 * time.Millisecond // no receive progress for this long: count what is in flight as lost
	udpMaxWin   = 512                    // most datagrams in flight
	tcpReadSize = 64 << 10
)

// SendUDP sends count datagrams of size payload bytes from src to dst:port
// over IPv6 if v6 is set, else IPv4, with sockets inside the two
// namespaces. A receiver bound to dst's address counts the datagrams that
// arrive with exactly size bytes from src's address. Port 0 picks a free
// port. It returns how many were sent and received; the error also reports
// stray datagrams and ctx expiry (DefaultTimeout applies if ctx has none).
//
// Sends are paced by the receiver: at most a window of datagrams that fits
// the receive buffer is in flight, so nothing is dropped for lack of buffer
// and received == sent on a healthy veth. If the receiver makes no progress
// for 500 ms the datagrams in flight are assumed lost and sending goes on.
func SendUDP(ctx context.Context, src, dst *Host, v6 bool, port, count, size int) (sent, received int, err error) {
	switch {
	case src == nil || dst == nil:
		return 0, 0, errors.New("testhost: SendUDP: nil host")
	case port < 0 || port > 65535:
		return 0, 0, fmt.Errorf("testhost: SendUDP: port %d out of range 0..65535", port)
	case count < 1 || count > MaxDatagrams:
		return 0, 0, fmt.Errorf("testhost: SendUDP: count %d out of range 1..%d", count, MaxDatagrams)
	case size < 0 || size > MaxDatagramSize:
		return 0, 0, fmt.Errorf("testhost: SendUDP: size %d out of range 0..%d", size, MaxDatagramSize)
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, fmt.Errorf("testhost: SendUDP: %w", err)
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	ver, srcAddr, dstAddr := family(src, dst, v6)
	network := "udp" + ver

	var rc *net.UDPConn
	if err := dst.Do(func() (err error) {
		rc, err = net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dstAddr, uint16(port))))
		return err
	}); err != nil {
		return 0, 0, fmt.Errorf("testhost: SendUDP: receiver: %w", err)
	}
	defer rc.Close()
	_ = rc.SetReadBuffer(udpRcvBuf) // best effort; the window below uses what the kernel granted
	var sc *net.UDPConn
	if err := src.Do(func() (err error) {
		sc, err = net.DialUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(srcAddr, 0)), rc.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		return 0, 0, fmt.Errorf("testhost: SendUDP: sender: %w", err)
	}
	defer sc.Close()
	stop := context.AfterFunc(ctx, func() { // unblock both sockets on cancel or deadline
		_ = rc.SetDeadline(time.Now())
		_ = sc.SetDeadline(time.Now())
	})
	defer stop()

	// Receiver: counts good datagrams, signals progress without blocking.
	var got, stray atomic.Int64
	progress := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, size+1) // one spare byte tells an oversized datagram apart
		for i := 0; i < count+udpMaxWin; i++ {
			n, from, err := rc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return // closed, deadline or cancel
			}
			if n == size && from.Addr().Unmap() == srcAddr {
				got.Add(1)
			} else {
				stray.Add(1)
			}
			select {
			case progress <- struct{}{}:
			default:
			}
		}
	}()

	win := udpWindow(rc, size)
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i)
	}
	var lost int64 // datagrams written off after a stall
	for sent < count && err == nil {
		for err == nil && int64(sent)-got.Load()-lost >= win {
			err = waitProgress(ctx, progress, func() { lost = int64(sent) - got.Load() })
		}
		if err != nil {
			break
		}
		if _, werr := sc.Write(payload); werr != nil {
			err = werr
			break
		}
		sent++
	}
	// Drain: wait until everything sent arrived, or no progress for udpStall.
	for err == nil && got.Load() < int64(sent) {
		stalled := false
		if err = waitProgress(ctx, progress, func() { stalled = true }); stalled {
			break
		}
	}
	_ = rc.Close()
	wg.Wait()
	received = int(got.Load())
	if err != nil && ctx.Err() != nil { // say why the sockets timed out
		err = fmt.Errorf("%w: %v", ctx.Err(), err)
	}
	if err == nil && stray.Load() > 0 {
		err = fmt.Errorf("%d stray datagrams (wrong size or source)", stray.Load())
	}
	if err != nil {
		err = fmt.Errorf("testhost: SendUDP: %w", err)
	}
	return sent, received, err
}

// waitProgress waits for a receive, ctx expiry (returning its error), or
// udpStall without progress (calling onStall).
func waitProgress(ctx context.Context, progress <-chan struct{}, onStall func()) error {
	t := time.NewTimer(udpStall)
	defer t.Stop()
	select {
	case <-progress:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		onStall()
		return nil
	}
}

// udpWindow returns how many datagrams of size bytes may be in flight so
// that they surely fit rc's receive buffer: the kernel charges each one its
// buffer's truesize (payload plus skb overhead; about double the payload
// when IP fragments are reassembled), so half the buffer at 2*size+2 KiB each.
func udpWindow(rc *net.UDPConn, size int) int64 {
	buf := 212992 // Linux default rmem
	if raw, err := rc.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) {
			if v, err := syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF); err == nil && v > 0 {
				buf = v
			}
		})
	}
	w := int64(buf/2) / int64(2*size+2048)
	return max(1, min(w, udpMaxWin))
}

// TCPTransfer opens one TCP connection from src to dst:port (IPv6 if v6 is
// set, else IPv4; port 0 picks a free port), writes exactly total bytes in
// writes of writeSize bytes, and closes its sending side. The server in
// dst's namespace reads to EOF; received is what it read. An error is
// returned if received differs from total, the peer is not src, or ctx
// expires (DefaultTimeout applies if ctx has no deadline).
func TCPTransfer(ctx context.Context, src, dst *Host, v6 bool, port, total, writeSize int) (received int, err error) {
	switch {
	case src == nil || dst == nil:
		return 0, errors.New("testhost: TCPTransfer: nil host")
	case port < 0 || port > 65535:
		return 0, fmt.Errorf("testhost: TCPTransfer: port %d out of range 0..65535", port)
	case total < 0 || int64(total) > MaxTCPBytes:
		return 0, fmt.Errorf("testhost: TCPTransfer: total %d out of range 0..%d", total, int64(MaxTCPBytes))
	case writeSize < 1 || writeSize > MaxWriteSize:
		return 0, fmt.Errorf("testhost: TCPTransfer: writeSize %d out of range 1..%d", writeSize, MaxWriteSize)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("testhost: TCPTransfer: %w", err)
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	ver, srcAddr, dstAddr := family(src, dst, v6)
	network := "tcp" + ver

	var ln *net.TCPListener
	if err := dst.Do(func() (err error) {
		ln, err = net.ListenTCP(network, net.TCPAddrFromAddrPort(netip.AddrPortFrom(dstAddr, uint16(port))))
		return err
	}); err != nil {
		return 0, fmt.Errorf("testhost: TCPTransfer: listen: %w", err)
	}
	defer ln.Close()
	var sconn atomic.Pointer[net.TCPConn]
	stop := context.AfterFunc(ctx, func() {
		_ = ln.SetDeadline(time.Now())
		if c := sconn.Load(); c != nil {
			_ = c.SetDeadline(time.Now())
		}
	})
	defer stop()

	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() { done <- r }()
		c, err := ln.AcceptTCP()
		if err != nil {
			r.err = fmt.Errorf("accept: %w", err)
			return
		}
		defer c.Close()
		sconn.Store(c)
		if ctx.Err() != nil { // cancelled between accept and Store: AfterFunc may have missed c
			r.err = ctx.Err()
			return
		}
		if peer := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap(); peer != srcAddr {
			r.err = fmt.Errorf("connection from %v, want %v", peer, srcAddr)
			return
		}
		buf := make([]byte, tcpReadSize)
		for r.n <= total { // bounded: a peer sending more than total ends the loop
			n, err := c.Read(buf)
			r.n += n
			if err != nil {
				if !errors.Is(err, io.EOF) {
					r.err = fmt.Errorf("read: %w", err)
				}
				return
			}
		}
	}()

	var cc *net.TCPConn
	err = src.Do(func() error {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(srcAddr, 0))}
		c, err := d.DialContext(ctx, network, ln.Addr().String())
		if err == nil {
			cc = c.(*net.TCPConn)
		}
		return err
	})
	if err == nil {
		err = writeAll(ctx, cc, total, writeSize)
		cc.Close()
	} else {
		_ = ln.Close() // unblock the acceptor
		err = fmt.Errorf("dial: %w", err)
	}
	r := <-done
	if err == nil {
		err = r.err
	}
	if err != nil && ctx.Err() != nil { // say why the sockets timed out
		err = fmt.Errorf("%w: %v", ctx.Err(), err)
	}
	if err == nil && r.n != total {
		err = fmt.Errorf("received %d of %d bytes", r.n, total)
	}
	if err != nil {
		err = fmt.Errorf("testhost: TCPTransfer: %w", err)
	}
	return r.n, err
}

// writeAll writes total bytes in writeSize pieces and half-closes cc.
func writeAll(ctx context.Context, cc *net.TCPConn, total, writeSize int) error {
	stop := context.AfterFunc(ctx, func() { _ = cc.SetDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, writeSize)
	for i := range buf {
		buf[i] = byte(i)
	}
	for left := total; left > 0; { // bounded by total/writeSize iterations and by ctx
		n, err := cc.Write(buf[:min(writeSize, left)])
		left -= n
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	if err := cc.CloseWrite(); err != nil {
		return fmt.Errorf("close write: %w", err)
	}
	return nil
}

// family returns the network suffix ("4" or "6") and the two endpoint addresses.
func family(src, dst *Host, v6 bool) (ver string, s, d netip.Addr) {
	if v6 {
		return "6", src.Addr6, dst.Addr6
	}
	return "4", src.Addr4, dst.Addr4
}

// withDefaultTimeout adds DefaultTimeout to a ctx without a deadline.
func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}
