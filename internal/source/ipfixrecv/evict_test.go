package ipfixrecv

import (
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
)

// slowHeader begins an IPFIX message of 65,535 bytes that never comes.
var slowHeader = []byte{0, 10, 0xff, 0xff}

// trickle writes a byte to each of ks every 100 ms (so none is ever
// idle) until stop is closed; at most 60 s.
func trickle(ks []net.Conn, stop chan struct{}, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 600 {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for _, k := range ks {
				k.Write([]byte{0}) // an evicted one fails: fine
			}
		}
	}()
}

// TestSlowlorisManySources: slowloris clients from 12 addresses, each
// within its per-source bound, hold every slot of MaxConns and trickle a
// byte now and then, so none is idle. A new connection evicts the one
// that has waited longest for a complete message: an exporter that
// connected first and sends whole messages keeps its connection through
// 48 slow clients and delivers every record, and a new exporter gets in
// and delivers everything; every eviction is counted, and so are the
// bytes of the messages the evicted clients had begun.
func TestSlowlorisManySources(t *testing.T) {
	c, m, stop := run(t, Config{Listen: []string{"tcp://127.0.0.1:0"}, MaxConns: 16, MaxConnsPerSource: 4})
	defer stop()
	addr := c.Addrs()[0].String()
	real := dialFrom(t, "127.0.0.9", addr)
	defer real.Close()
	seq := uint32(0)
	send := func(n int) {
		t.Helper()
		for range n {
			if _, err := real.Write(oneFieldMsg(seq, 1, true)); err != nil {
				t.Fatalf("the exporter's connection: %v", err)
			}
			seq++
		}
	}
	send(10)
	waitRecords(t, m, 10)
	var slow []net.Conn
	halt := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(halt)
		wg.Wait()
		for _, k := range slow {
			k.Close()
		}
	}()
	for i := range 48 {
		k := dialFrom(t, fmt.Sprintf("127.0.3.%d", 1+i%12), addr)
		k.Write(append(slowHeader, 1))
		slow = append(slow, k)
		if i%8 == 7 {
			send(1) // the exporter keeps sending whole messages meanwhile
		}
	}
	trickle(slow, halt, &wg)
	waitStats(t, c, "49 connections accepted", func(st Stats) bool { return st.ConnsAccepted == 49 })
	send(10)
	waitRecords(t, m, 26)
	// A new exporter evicts a slow client and delivers everything.
	want := randRecords(326, 14)
	exportTo(t, "ipfix+tcp://"+addr, nil, want)
	waitRecords(t, m, 26+len(want))
	send(5) // the first exporter is still connected
	waitRecords(t, m, 31+len(want))
	waitStats(t, c, "the evicted clients' goroutines to count what they cut", func(st Stats) bool {
		return st.PartialMessages == st.ConnsEvicted
	})
	st := c.Stats()
	if st.ConnsEvicted != 50-16 || st.ConnsRejected != 0 || st.ConnsRejectedPerSource != 0 || st.PartialBytes < 4*st.ConnsEvicted ||
		st.Records != uint64(31+len(want)) || st.ConnsOpen > 16 {
		t.Errorf("stats %+v", st)
	}
}

// TestMessageTimeout: a client that trickles a message a byte at a time
// (never idle) is closed MessageTimeout after its first byte, counted,
// with the bytes it had sent; a client that sends whole messages slowly
// is not.
func TestMessageTimeout(t *testing.T) {
	c, m, stop := run(t, Config{Listen: []string{"tcp://127.0.0.1:0"}, MessageTimeout: 500 * time.Millisecond,
		IdleConnTimeout: 20 * time.Second})
	defer stop()
	addr := c.Addrs()[0].String()
	slow, good := dialFrom(t, "127.0.0.2", addr), dialFrom(t, "127.0.0.3", addr)
	defer slow.Close()
	defer good.Close()
	t0 := time.Now()
	slow.Write(slowHeader)
	sent := len(slowHeader)
	for i := range 300 { // a byte every 20 ms, until the collector closes it (at most 6 s)
		time.Sleep(20 * time.Millisecond)
		if _, err := slow.Write([]byte{0}); err != nil {
			break
		}
		sent++
		if i%10 == 0 {
			if _, err := good.Write(oneFieldMsg(uint32(i/10), 1, true)); err != nil {
				t.Fatal(err)
			}
		}
		if c.Stats().ConnsMessageTimeouts == 1 {
			break
		}
	}
	waitStats(t, c, "the slow message to time out", func(st Stats) bool { return st.ConnsMessageTimeouts == 1 && st.PartialMessages == 1 })
	if d := time.Since(t0); d < 500*time.Millisecond {
		t.Errorf("closed after %v, before the message timeout", d)
	}
	n := m.len()
	good.Write(oneFieldMsg(100, 1, true))
	waitRecords(t, m, n+1)
	st := c.Stats()
	if st.ConnsOpen != 1 || st.PartialBytes == 0 || st.PartialBytes > uint64(sent) || st.ConnsIdleClosed != 0 || st.ReadErrors != 0 {
		t.Errorf("sent %d bytes; stats %+v", sent, st)
	}
}

// TestEvictShutdown: slow clients evicting each other count the header
// each had sent (read, or still in the kernel's queue: SIOCINQ); with
// MaxConns slots held, Run still returns within 2 s of its context's end
// and no goroutine outlives it.
func TestEvictShutdown(t *testing.T) {
	baseline := runtime.NumGoroutine()
	c, _, stop := run(t, Config{Listen: []string{"tcp://127.0.0.1:0"}, MaxConns: 8, MaxConnsPerSource: 100})
	addr := c.Addrs()[0].String()
	var ks []net.Conn
	for range 40 {
		k := dialFrom(t, "127.0.0.4", addr)
		k.Write(slowHeader)
		ks = append(ks, k)
	}
	waitStats(t, c, "40 connections, 32 evicted with what they had sent", func(st Stats) bool {
		return st.ConnsAccepted == 40 && st.ConnsOpen <= 8 && st.PartialMessages >= 32
	})
	t0 := time.Now()
	stop()
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("Run returned %v after its context ended", d)
	}
	for _, k := range ks {
		k.Close()
	}
	if st := c.Stats(); st.ConnsOpen != 0 || st.ConnsEvicted != 32 || st.PartialMessages < 32 || st.PartialBytes != 4*st.PartialMessages {
		t.Errorf("stats %+v", st)
	}
	waitFor(t, "the collector's goroutines to end", func() bool { return runtime.NumGoroutine() <= baseline })
}
