package engine

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/bench/profile"
)

// direct is the Stopper of in-process runs: the client calls its server.
type direct struct {
	s     *Server
	mu    sync.Mutex
	calls int
}

func (d *direct) Stop(k Key, txn int, n uint64) (uint64, error) {
	d.mu.Lock()
	d.calls++
	d.mu.Unlock()
	return d.s.StopAt(k, txn, n)
}

func conn(proto profile.Proto, v6 bool) profile.Op {
	return profile.Op{Kind: profile.Connect, Proto: proto, IPv6: v6, NoDelay: true}
}

func data(k profile.OpKind, size, count int) profile.Op {
	return profile.Op{Kind: k, Size: size, Count: count}
}

var disc = profile.Op{Kind: profile.Disconnect}

// open, body for d, close: the uperf shape.
func shaped(threads int, c profile.Op, d time.Duration, iters int, body ...profile.Op) *profile.Profile {
	return &profile.Profile{Name: "t", Groups: []profile.Group{{Threads: threads, Txns: []profile.Txn{
		{Iterations: 1, Ops: []profile.Op{c}},
		{Duration: d, Iterations: iters, Ops: body},
		{Iterations: 1, Ops: []profile.Op{disc}},
	}}}}
}

// runLoopback runs p over loopback with pairs client processes (here:
// goroutines) and returns the client results and the server's totals.
func runLoopback(t *testing.T, p *profile.Profile, pairs int) ([]*ClientResult, *ServerResult, *direct) {
	t.Helper()
	plan := Plan{Profile: p, Pairs: pairs, BasePort: 10000 + rand.IntN(20000)} // below the ephemeral ports
	srv, err := NewServer(plan)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv.Start(ctx)
	st := &direct{s: srv}
	lo := Addrs{V4: netip.MustParseAddr("127.0.0.1"), V6: netip.MustParseAddr("::1")}
	res := make([]*ClientResult, pairs)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = RunClient(ctx, &ClientConfig{Plan: plan, Pair: i, Local: [2]Addrs{lo, lo}, Server: [2]Addrs{lo, lo}, Stop: st, T0: t0, Interval: 50 * time.Millisecond})
		}()
	}
	wg.Wait()
	sr := srv.Wait()
	for _, r := range res {
		if len(r.Errors) > 0 {
			t.Errorf("client: %s", strings.Join(r.Errors, "; "))
		}
	}
	if len(sr.Errors) > 0 {
		t.Errorf("server: %s", strings.Join(sr.Errors, "; "))
	}
	return res, sr, st
}

func sums(rs []*ClientResult) (tx, rx uint64, conns []int) {
	for _, r := range rs {
		for _, c := range r.Conns {
			tx += c.FwdData
			rx += c.RevData
		}
		conns = append(conns, len(r.Conns))
	}
	return
}

func TestTCPStream(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		p := shaped(2, conn(profile.TCP, v6), 300*time.Millisecond, 0, data(profile.Write, 16384, 4))
		rs, sr, st := runLoopback(t, p, 2)
		tx, rx, conns := sums(rs)
		if tx == 0 || tx != sr.RxData || rx != 0 || sr.TxData != 0 || sr.Conns != 4 {
			t.Fatalf("v6=%v: client sent %d, server read %d; client read %d, server wrote %d; %d conns", v6, tx, sr.RxData, rx, sr.TxData, sr.Conns)
		}
		if st.calls != 4 || conns[0] != 2 || conns[1] != 2 {
			t.Errorf("stop calls %d, conns %v", st.calls, conns)
		}
		txns, ops, ivs, el := Aggregate(p, rs)
		if len(txns) != 3 || len(ops) != 3 || el <= 0 {
			t.Fatalf("aggregate: %d txns %d ops elapsed %v", len(txns), len(ops), el)
		}
		w := ops[1]
		if w.Bytes != tx || w.Latency.Count != tx/16384 || txns[1].Latency.Count*4 != w.Latency.Count || w.BytesPerSec <= 0 {
			t.Errorf("write op %+v, txn %+v, sent %d", w, txns[1], tx)
		}
		var ib uint64
		for _, iv := range ivs {
			ib += iv.Bytes
		}
		if ib != tx || len(ivs) < 5 {
			t.Errorf("intervals: %d bytes in %d, want %d", ib, len(ivs), tx)
		}
		for _, r := range rs {
			for _, c := range r.Conns {
				if c.FwdPkts < 3 || c.RevPkts < 2 || !c.Exact && c.Retransmits == 0 {
					t.Errorf("conn %+v", c)
				}
			}
		}
	}
}

// Request-response, the server answering: the bytes each way match, and
// the transaction count is the iteration count.
func TestTCPRequestResponse(t *testing.T) {
	p := shaped(3, conn(profile.TCP, false), 200*time.Millisecond, 0, data(profile.Write, 64, 1), data(profile.Read, 1024, 1))
	rs, sr, _ := runLoopback(t, p, 1)
	tx, rx, _ := sums(rs)
	txns, ops, _, _ := Aggregate(p, rs)
	n := txns[1].Latency.Count
	if n < 100 || tx != 64*n || rx != 1024*n || sr.RxData != tx || sr.TxData != rx {
		t.Fatalf("%d iterations, sent %d read %d, server read %d wrote %d", n, tx, rx, sr.RxData, sr.TxData)
	}
	if ops[2].Latency.P50 <= 0 || ops[2].Latency.P99 < ops[2].Latency.P50 || txns[1].Latency.Avg < ops[2].Latency.Avg {
		t.Errorf("latencies: read %+v, txn %+v", ops[2].Latency, txns[1].Latency)
	}
}

// The server writes first (a download): the server may be ahead when the
// client's duration ends, and the client then finishes the extra iterations.
func TestServerFirst(t *testing.T) {
	p := shaped(1, conn(profile.TCP, true), 200*time.Millisecond, 0, data(profile.Read, 65536, 2))
	rs, sr, _ := runLoopback(t, p, 1)
	_, rx, _ := sums(rs)
	if rx == 0 || rx != sr.TxData || rx%(2*65536) != 0 {
		t.Fatalf("client read %d, server wrote %d", rx, sr.TxData)
	}
}

// Connect, request, response, disconnect in one loop: one connection per
// iteration, each recorded.
func TestCRR(t *testing.T) {
	p := &profile.Profile{Name: "crr", Groups: []profile.Group{{Threads: 2, Txns: []profile.Txn{
		{Duration: 200 * time.Millisecond, Ops: []profile.Op{conn(profile.TCP, false), data(profile.Write, 100, 1), data(profile.Read, 200, 1), disc}},
	}}}}
	rs, sr, _ := runLoopback(t, p, 1)
	txns, _, _, _ := Aggregate(p, rs)
	n := txns[0].Latency.Count
	_, _, conns := sums(rs)
	if n < 20 || uint64(conns[0]) != n || sr.Conns != n || sr.RxData != 100*n || sr.TxData != 200*n {
		t.Fatalf("%d iterations, %d conns recorded, server accepted %d, read %d wrote %d", n, conns[0], sr.Conns, sr.RxData, sr.TxData)
	}
}

func TestUDP(t *testing.T) {
	// Request-response by count: no loss on loopback at this pace.
	p := shaped(2, conn(profile.UDP, false), 0, 300, data(profile.SendTo, 64, 1), data(profile.RecvFrom, 512, 1))
	rs, sr, st := runLoopback(t, p, 1)
	tx, rx, _ := sums(rs)
	if tx != 2*300*64 || rx != 2*300*512 || sr.RxData != tx || sr.TxData != rx || sr.Lost != 0 || st.calls != 2 {
		t.Fatalf("udp rr: sent %d read %d; server read %d wrote %d lost %d; stops %d", tx, rx, sr.RxData, sr.TxData, sr.Lost, st.calls)
	}
	for _, c := range rs[0].Conns {
		if c.FwdPkts != 300 || c.RevPkts != 300 || c.FwdIPBytes != 300*(64+28) || !c.Exact {
			t.Errorf("udp conn %+v", c)
		}
	}
	// A stream for a duration over IPv6: what the server did not get was
	// lost, never more.
	p = shaped(1, conn(profile.UDP, true), 200*time.Millisecond, 0, data(profile.Write, 1200, 8))
	rs, sr, _ = runLoopback(t, p, 1)
	tx, _, _ = sums(rs)
	if tx == 0 || sr.RxData > tx || sr.RxData == 0 {
		t.Fatalf("udp stream: sent %d, server read %d (lost %d)", tx, sr.RxData, sr.Lost)
	}
}

func TestPlanPorts(t *testing.T) {
	p := &profile.Profile{Groups: []profile.Group{{Threads: 3}, {Threads: 2}}}
	plan := Plan{Profile: p, Pairs: 2, BasePort: 30000}
	seen := map[int]bool{}
	for pair := range 2 {
		for g, n := range []int{3, 2} {
			for th := range n {
				port := plan.Port(Key{pair, g, th})
				if seen[port] || port < 30000 || port >= 30010 {
					t.Errorf("port %d for %d/%d/%d", port, pair, g, th)
				}
				seen[port] = true
			}
		}
	}
	if err := (&Plan{Profile: p, Pairs: 2, BasePort: 65530}).Check(); err == nil {
		t.Error("ports past 65535 accepted")
	}
}

// Back-to-back transactions: what the client sends right after agreeing on
// an end belongs to the next transaction, and the server must not lose it
// (it pushes back bytes, a datagram or a connection that came too early).
func TestNextTransactionData(t *testing.T) {
	for _, proto := range []profile.Proto{profile.TCP, profile.UDP} {
		send := profile.Write
		if proto == profile.UDP {
			send = profile.SendTo
		}
		p := &profile.Profile{Name: "next", Groups: []profile.Group{{Threads: 3, Txns: []profile.Txn{
			{Iterations: 1, Ops: []profile.Op{conn(proto, false)}},
			{Duration: 100 * time.Millisecond, Ops: []profile.Op{data(send, 1000, 1)}},
			{Duration: 100 * time.Millisecond, Ops: []profile.Op{data(send, 300, 1), data(profile.Read, 20, 1)}},
			{Iterations: 50, Ops: []profile.Op{data(send, 700, 1), data(profile.Read, 30, 1)}},
			{Iterations: 1, Ops: []profile.Op{disc}},
			{Duration: 100 * time.Millisecond, Ops: []profile.Op{conn(profile.TCP, true), data(profile.Write, 10, 1), disc}},
			{Duration: 100 * time.Millisecond, Ops: []profile.Op{conn(profile.TCP, false), data(profile.Write, 20, 1), data(profile.Read, 5, 1), disc}},
		}}}}
		rs, sr, _ := runLoopback(t, p, 1)
		tx, rx, _ := sums(rs)
		// A UDP stream over loopback loses datagrams (the receiver's
		// buffer overflows); the request-response transactions after it
		// must lose nothing, and no error must come up.
		lossy := proto == profile.UDP && sr.RxData < tx
		if !lossy && tx != sr.RxData || rx != sr.TxData || !lossy && sr.Lost != 0 || sr.Stray != 0 {
			t.Errorf("%v: client sent %d read %d; server read %d wrote %d, lost %d stray %d", proto, tx, rx, sr.RxData, sr.TxData, sr.Lost, sr.Stray)
		}
	}
}

// runN runs one thread of body for n iterations over loopback.
func runN(b *testing.B, c profile.Op, n int, body ...profile.Op) {
	p := shaped(1, c, 0, n, body...)
	plan := Plan{Profile: p, Pairs: 1, BasePort: 10000 + rand.IntN(20000)}
	srv, err := NewServer(plan)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	srv.Start(ctx)
	lo := Addrs{V4: netip.MustParseAddr("127.0.0.1"), V6: netip.MustParseAddr("::1")}
	b.ResetTimer()
	r := RunClient(ctx, &ClientConfig{Plan: plan, Local: [2]Addrs{lo, lo}, Server: [2]Addrs{lo, lo}, Stop: &direct{s: srv}})
	b.StopTimer()
	if len(r.Errors) > 0 {
		b.Fatal(r.Errors)
	}
	srv.Wait()
}

// BenchmarkLoopbackRR times one TCP request-response iteration (64 bytes
// each way) through the driver, client and server threads included.
func BenchmarkLoopbackRR(b *testing.B) {
	b.ReportAllocs()
	runN(b, conn(profile.TCP, false), b.N, data(profile.Write, 64, 1), data(profile.Read, 64, 1))
}

// BenchmarkLoopbackStream times one 128 KiB write of a TCP stream.
func BenchmarkLoopbackStream(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(128 << 10)
	runN(b, conn(profile.TCP, false), b.N, data(profile.Write, 128<<10, 1))
}
