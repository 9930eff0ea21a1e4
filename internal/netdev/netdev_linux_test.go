//go:build linux

package netdev

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/testhost"
)

const waitLimit = 5 * time.Second // every wait for an event is bounded by this

// TestConstants checks the decoder's own copies of kernel constants
// against golang.org/x/sys/unix.
func TestConstants(t *testing.T) {
	pairs := []struct {
		name      string
		got, want int
	}{
		{"NLMSG_NOOP", nlmsgNoop, unix.NLMSG_NOOP},
		{"NLMSG_ERROR", nlmsgError, unix.NLMSG_ERROR},
		{"NLMSG_DONE", nlmsgDone, unix.NLMSG_DONE},
		{"RTM_NEWLINK", rtmNewLink, unix.RTM_NEWLINK},
		{"RTM_DELLINK", rtmDelLink, unix.RTM_DELLINK},
		{"RTM_GETLINK", rtmGetLink, unix.RTM_GETLINK},
		{"NLM_F_REQUEST", nlmFRequest, unix.NLM_F_REQUEST},
		{"NLM_F_DUMP", nlmFDump, unix.NLM_F_DUMP},
		{"NLM_F_DUMP_INTR", nlmFDumpIntr, unix.NLM_F_DUMP_INTR},
		{"NLA_TYPE_MASK", nlaTypeMask, ^(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER) & 0xffff},
		{"IFLA_IFNAME", iflaIfname, unix.IFLA_IFNAME},
		{"IFLA_MASTER", iflaMaster, unix.IFLA_MASTER},
		{"IFLA_LINKINFO", iflaLinkinfo, unix.IFLA_LINKINFO},
		{"IFLA_EXT_MASK", iflaExtMask, unix.IFLA_EXT_MASK},
		{"IFLA_INFO_KIND", iflaInfoKind, unix.IFLA_INFO_KIND},
		{"IFF_UP", iffUp, unix.IFF_UP},
		{"IFF_LOOPBACK", iffLoopback, unix.IFF_LOOPBACK},
		{"IFF_RUNNING", iffRunning, unix.IFF_RUNNING},
		{"IFNAMSIZ", ifNamSiz, unix.IFNAMSIZ},
		{"sizeof(nlmsghdr)", nlmsgHdrLen, unix.SizeofNlMsghdr},
		{"sizeof(ifinfomsg)", ifinfomsgLen, unix.SizeofIfInfomsg},
		{"sizeof(rtattr)", rtattrHdrLen, unix.SizeofRtAttr},
		{"AF_BRIDGE", tAFBridge, unix.AF_BRIDGE},
		{"IFF_LOWER_UP", tFlagLowerUp, unix.IFF_LOWER_UP},
		{"ARPHRD_LOOPBACK", tARPHRDLoopback, unix.ARPHRD_LOOPBACK},
	}
	for _, p := range pairs {
		if p.got != p.want {
			t.Errorf("%s = %#x, x/sys/unix says %#x", p.name, p.got, p.want)
		}
	}
}

// leakCheck fails the test if it ends with more goroutines than it began
// with (after a bounded grace period for goroutines that are exiting).
func leakCheck(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() { // registered first, so it runs after every other cleanup
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Errorf("goroutines: %d before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
	})
}

// ip runs an ip(8) command inside h's namespace.
func ip(t *testing.T, h *testhost.Host, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := h.Exec(ctx, "ip", args...); err != nil {
		t.Fatalf("ip %s in %s: %v: %s", strings.Join(args, " "), h.Name, err, out)
	}
}

// simpleKind is the link type the tests create as a plain standalone
// link: "dummy" where the kernel has it, else "ifb" (some minimal kernels,
// such as this project's VM images, are built without the dummy driver).
// Both are Ethernet-like, need no peer, and are up and running once set up.
var (
	kindOnce sync.Once
	kindName string
)

func simpleKind(t *testing.T, h *testhost.Host) string {
	t.Helper()
	kindOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, k := range []string{"dummy", "ifb"} {
			if _, err := h.Exec(ctx, "ip", "link", "add", "kprobe0", "type", k); err == nil {
				kindName = k
				h.Exec(ctx, "ip", "link", "del", "kprobe0")
				return
			}
		}
	})
	if kindName == "" {
		t.Fatal("this kernel can create neither dummy nor ifb links")
	}
	return kindName
}

// addLink creates a standalone link of simpleKind with the given index.
func addLink(t *testing.T, h *testhost.Host, name string, index int, extra ...string) {
	t.Helper()
	args := append([]string{"link", "add", name, "index", strconv.Itoa(index)}, extra...)
	ip(t, h, append(args, "type", simpleKind(t, h))...)
}

// watchIn opens a Watcher inside h's namespace, closed at the end of the test.
func watchIn(t *testing.T, h *testhost.Host, rcvbuf int) *Watcher {
	t.Helper()
	var w *Watcher
	if err := h.Do(func() (err error) { w, err = watch(rcvbuf); return err }); err != nil {
		t.Fatalf("Watch in %s: %v", h.Name, err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// listIn runs List inside h's namespace.
func listIn(t *testing.T, h *testhost.Host) []Link {
	t.Helper()
	var links []Link
	if err := h.Do(func() (err error) { links, err = List(); return err }); err != nil {
		t.Fatalf("List in %s: %v", h.Name, err)
	}
	return links
}

// item is what the reader goroutine passes on: an event or an error.
type item struct {
	ev  Event
	err error
}

// reader calls Next in a goroutine until ErrClosed and hands over what it
// returns. The goroutine ends when the test closes the watcher (cleanup).
func reader(t *testing.T, w *Watcher) <-chan item {
	ch := make(chan item, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := w.Next()
			if errors.Is(err, ErrClosed) {
				return
			}
			select {
			case ch <- item{ev, err}:
			default:
				ch <- item{err: errors.New("test reader: channel full")}
				return
			}
		}
	}()
	t.Cleanup(func() {
		w.Close()
		select {
		case <-done:
		case <-time.After(waitLimit):
			t.Errorf("reader goroutine did not stop within %v of Close", waitLimit)
		}
	})
	return ch
}

// until collects events from ch up to and including the first one for
// which stop is true. Errors are collected too; a wait longer than
// waitLimit fails the test.
func until(t *testing.T, ch <-chan item, stop func(Event) bool) (evs []Event, errs []error) {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case it := <-ch:
			if it.err != nil {
				errs = append(errs, it.err)
				continue
			}
			evs = append(evs, it.ev)
			if stop(it.ev) {
				return evs, errs
			}
		case <-timeout:
			t.Fatalf("no matching event within %v; got %d events %+v, errors %v", waitLimit, len(evs), evs, errs)
		}
	}
}

func isNew(index int) func(Event) bool {
	return func(e Event) bool { return e.Link.Index == index && !e.Deleted }
}

// baseLinks is what a fresh Pair host holds: lo and its veth end, which
// testhost creates with ifindex 10 in host A.
func baseLinks(p *testhost.Pair) []Link {
	return []Link{
		{Index: 1, Name: "lo", Up: true, Running: true, Loopback: true, Type: unix.ARPHRD_LOOPBACK},
		{Index: 10, Name: p.A.Iface, Up: true, Running: true, Type: unix.ARPHRD_ETHER, Kind: "veth"},
	}
}

func TestList(t *testing.T) {
	leakCheck(t)
	p := testhost.NewPair(t)
	if got, want := listIn(t, p.A), baseLinks(p); !reflect.DeepEqual(got, want) {
		t.Fatalf("List in A:\n got %+v\nwant %+v", got, want)
	}

	// A bridge (down) with a dummy enslaved to it.
	ip(t, p.A, "link", "add", "br0", "index", "20", "type", "bridge")
	addLink(t, p.A, "dum1", 21, "master", "br0")
	ip(t, p.A, "link", "set", "dum1", "up")
	want := append(baseLinks(p),
		Link{Index: 20, Name: "br0", Type: unix.ARPHRD_ETHER, Kind: "bridge"},
		Link{Index: 21, Name: "dum1", Up: true, Running: true, Type: unix.ARPHRD_ETHER, Master: 20, Kind: simpleKind(t, p.A)})
	got := listIn(t, p.A)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("List in A after adding br0 and dum1:\n got %+v\nwant %+v", got, want)
	}

	// Cross-check with the standard library's own netlink decoder.
	var ifs []net.Interface
	if err := p.A.Do(func() (err error) { ifs, err = net.Interfaces(); return err }); err != nil {
		t.Fatal(err)
	}
	if len(ifs) != len(got) {
		t.Fatalf("net.Interfaces has %d links, List %d", len(ifs), len(got))
	}
	for i, ifi := range ifs {
		l := got[i]
		if ifi.Index != l.Index || ifi.Name != l.Name || (ifi.Flags&net.FlagUp != 0) != l.Up ||
			(ifi.Flags&net.FlagRunning != 0) != l.Running || (ifi.Flags&net.FlagLoopback != 0) != l.Loopback {
			t.Errorf("net.Interfaces %+v disagrees with List %+v", ifi, l)
		}
	}

	// Host B holds only lo and its own veth end (index 11): nothing leaked across.
	gotB := listIn(t, p.B)
	if len(gotB) != 2 || gotB[0].Name != "lo" || gotB[1].Index != 11 || gotB[1].Name != p.B.Iface {
		t.Errorf("List in B: %+v, want lo and %s (11)", gotB, p.B.Iface)
	}
	if st := ListStats(); st.Malformed != 0 || st.Events != 0 || st.Overruns != 0 {
		t.Errorf("ListStats %+v: want nothing malformed, no events or overruns", st)
	}
}

func TestWatchEvents(t *testing.T) {
	leakCheck(t)
	p := testhost.NewPair(t)
	simpleKind(t, p.A) // probe before watching: the probe makes events of its own
	wa := watchIn(t, p.A, watchRcvBuf)
	wb := watchIn(t, p.B, watchRcvBuf)
	if got, want := wa.Initial(), baseLinks(p); !reflect.DeepEqual(got, want) {
		t.Fatalf("Initial in A:\n got %+v\nwant %+v", got, want)
	}
	cha, chb := reader(t, wa), reader(t, wb)

	addLink(t, p.A, "dummy0", 42)
	ip(t, p.A, "link", "set", "dummy0", "up")
	ip(t, p.A, "link", "del", "dummy0")
	addLink(t, p.A, "mark0", 43) // marks the end
	evs, errs := until(t, cha, isNew(43))
	if len(errs) != 0 {
		t.Errorf("errors from Next: %v", errs)
	}
	dummy := Link{Index: 42, Name: "dummy0", Type: unix.ARPHRD_ETHER, Kind: simpleKind(t, p.A)}
	up := dummy
	up.Up, up.Running = true, true
	var seq []Event // events of index 42, in order
	for _, e := range evs {
		switch e.Link.Index {
		case 42:
			seq = append(seq, e)
		case 43:
		default:
			t.Errorf("unexpected event %+v", e)
		}
	}
	t.Logf("events of dummy0: %+v", seq)
	// new (down), then updates that bring it up, then deleted (a last
	// update may take it down first), and nothing after the deletion.
	if len(seq) < 3 {
		t.Fatalf("events of dummy0: %+v, want at least new, up, deleted", seq)
	}
	if seq[0] != (Event{Link: dummy}) {
		t.Errorf("first event %+v, want %+v", seq[0], Event{Link: dummy})
	}
	last := seq[len(seq)-1]
	if !last.Deleted || last.Link.Name != "dummy0" || last.Link.Kind != dummy.Kind {
		t.Errorf("last event %+v, want the deletion of dummy0", last)
	}
	sawUp := false
	for _, e := range seq[1 : len(seq)-1] {
		if e.Deleted || e.Link.Name != "dummy0" {
			t.Errorf("middle event %+v: want an update of dummy0", e)
		}
		sawUp = sawUp || e == Event{Link: up}
	}
	if !sawUp {
		t.Errorf("no event shows dummy0 up and running: %+v", seq)
	}
	if st := wa.Stats(); st.Events != uint64(len(evs)) || st.Malformed != 0 || st.Overruns != 0 {
		t.Errorf("Stats %+v, want %d events, nothing malformed, no overrun", st, len(evs))
	}

	// Host B saw none of it: its own marker is the first thing it hears.
	addLink(t, p.B, "markb", 44)
	evsB, _ := until(t, chb, isNew(44))
	for _, e := range evsB {
		if e.Link.Index != 44 {
			t.Errorf("host B saw %+v", e)
		}
	}
}

// A bridge port leaving its bridge gets an AF_BRIDGE RTM_DELLINK: that is
// not the device going away.
func TestWatchBridgePort(t *testing.T) {
	leakCheck(t)
	p := testhost.NewPair(t)
	simpleKind(t, p.A) // probe before watching: the probe makes events of its own
	w := watchIn(t, p.A, watchRcvBuf)
	ch := reader(t, w)
	ip(t, p.A, "link", "add", "br1", "index", "50", "type", "bridge")
	addLink(t, p.A, "d1", 51)
	ip(t, p.A, "link", "set", "d1", "master", "br1")
	ip(t, p.A, "link", "set", "d1", "nomaster")
	addLink(t, p.A, "mark1", 52)
	evs, _ := until(t, ch, isNew(52))
	masters := []int{}
	for _, e := range evs {
		if e.Link.Index == 51 {
			if e.Deleted {
				t.Errorf("d1 reported deleted: %+v", e)
			}
			if len(masters) == 0 || masters[len(masters)-1] != e.Link.Master {
				masters = append(masters, e.Link.Master)
			}
		}
	}
	if !reflect.DeepEqual(masters, []int{0, 50, 0}) {
		t.Errorf("d1's master went %v, want [0 50 0]", masters)
	}
	if st := w.Stats(); st.Ignored < 1 {
		t.Errorf("Stats %+v: the AF_BRIDGE messages (at least the port's deletion) should be ignored", st)
	}
}

func TestWatchOverrun(t *testing.T) {
	leakCheck(t)
	p := testhost.NewPair(t)
	simpleKind(t, p.A)         // probe before watching: the probe makes events of its own
	w := watchIn(t, p.A, 4096) // a few notifications fill it
	const n = 100
	var batch strings.Builder
	for i := range n {
		batch.WriteString("link add fl" + strconv.Itoa(i) + " index " + strconv.Itoa(100+i) + " type " + simpleKind(t, p.A) + "\n")
	}
	file := filepath.Join(t.TempDir(), "batch")
	if err := os.WriteFile(file, []byte(batch.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ip(t, p.A, "-batch", file) // all notifications are sent before anything reads them

	ch := reader(t, w)
	timeout := time.After(waitLimit)
	overruns := 0
	for overruns == 0 {
		select {
		case it := <-ch:
			if errors.Is(it.err, ErrOverrun) {
				overruns++
			} else if it.err != nil {
				t.Fatalf("Next: %v", it.err)
			}
		case <-timeout:
			t.Fatalf("no ErrOverrun within %v", waitLimit)
		}
	}
	links, err := w.List()
	if err != nil {
		t.Fatalf("List after overrun: %v", err)
	}
	if len(links) != 2+n || links[2].Name != "fl0" || links[2+n-1].Index != 100+n-1 {
		t.Fatalf("List after overrun: %d links (%+v ... ), want lo, the veth and %d dummies", len(links), links[:min(len(links), 3)], n)
	}
	// The watcher keeps working: a link added now is reported.
	addLink(t, p.A, "after", 999)
	evs, errs := until(t, ch, isNew(999))
	for _, err := range errs {
		if !errors.Is(err, ErrOverrun) {
			t.Errorf("Next: %v", err)
		}
		overruns++
	}
	t.Logf("%d ErrOverrun, then %d events; stats %+v", overruns, len(evs), w.Stats())
	if len(evs) >= n+1 {
		t.Errorf("%d events after an overrun of %d notifications: nothing was lost?", len(evs), n)
	}
	// Messages: the initial dump (lo, veth, DONE), the dump after the
	// overrun (lo, veth, n links, DONE) and the notifications that survived.
	wantMsgs := uint64(3 + 2 + n + 1 + len(evs))
	if st := w.Stats(); st.Overruns != uint64(overruns) || st.Malformed != 0 || st.Messages != wantMsgs || st.Events != uint64(len(evs)) {
		t.Errorf("Stats %+v: want Overruns = %d (the ErrOverruns Next returned), nothing malformed, %d messages, %d events",
			st, overruns, wantMsgs, len(evs))
	}
}

// liveDatagrams returns the raw datagrams of a link dump of the calling
// thread's namespace (read only), or nil when netlink is not usable.
func liveDatagrams(tb testing.TB) [][]byte {
	d, err := newDumper()
	if err != nil {
		tb.Logf("no live seeds: %v", err)
		return nil
	}
	defer d.close()
	var grams [][]byte
	var c counters
	if _, err := d.list(&c, func(b []byte) { grams = append(grams, bytes.Clone(b)) }); err != nil {
		tb.Logf("no live seeds: %v", err)
		return nil
	}
	return grams
}

// BenchmarkList dumps the links of a test host holding lo, its veth and
// a bridge with 16 ports.
func BenchmarkList(b *testing.B) {
	p := testhost.NewPair(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := p.A.Exec(ctx, "ip", "link", "add", "br0", "type", "bridge"); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	for i := range 16 {
		if out, err := p.A.Exec(ctx, "ip", "link", "add", "p"+strconv.Itoa(i), "master", "br0", "type", "veth", "peer", "name", "q"+strconv.Itoa(i)); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
	var d *dumper
	if err := p.A.Do(func() (err error) { d, err = newDumper(); return err }); err != nil {
		b.Fatal(err)
	}
	defer d.close()
	var c counters
	b.ReportAllocs()
	for b.Loop() {
		links, err := d.list(&c, nil)
		if err != nil || len(links) != 2+1+32 {
			b.Fatalf("list: %d links, %v", len(links), err)
		}
	}
}
