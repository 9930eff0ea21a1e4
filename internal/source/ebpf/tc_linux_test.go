//go:build linux

package ebpf

import (
	"context"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/testhost"
)

// tcHost makes a test pair and returns it with B's ifindex (inside B).
func tcHost(t *testing.T) (*testhost.Pair, int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("tc filters need root (CAP_BPF, CAP_NET_ADMIN); CI runs this as root")
	}
	pr := testhost.NewPair(t)
	idx := 0
	if err := pr.B.Do(func() error {
		ifc, err := net.InterfaceByName(pr.B.Iface)
		if ifc != nil {
			idx = ifc.Index
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return pr, idx
}

// tcNoop loads the empty tc program weir_noop.
func tcNoop(t testing.TB) *ebpf.Program {
	t.Helper()
	spec, err := loadFlow()
	if err != nil {
		t.Fatal(err)
	}
	prog, err := ebpf.NewProgram(spec.Programs["weir_noop"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog
}

// tcAttachIn runs attachTC inside h, failing the test on error; the filter
// is closed at cleanup (a no-op if the test closed it).
func tcAttachIn(t *testing.T, h *testhost.Host, idx int, prog *ebpf.Program, egress bool, name string) *tcFilter {
	t.Helper()
	var f *tcFilter
	if err := h.Do(func() (err error) { f, err = attachTC(idx, prog, egress, name); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// tcCheck checks, inside h, the sorted BPF filter names on idx's ingress
// and egress hooks and whether it has a clsact qdisc.
func tcCheck(t *testing.T, h *testhost.Host, idx int, when string, in, eg []string, clsact bool) {
	t.Helper()
	var gotIn, gotEg []string
	var gotQ bool
	err := h.Do(func() (err error) {
		if gotIn, err = tcFilters(idx, false); err != nil {
			return err
		}
		if gotEg, err = tcFilters(idx, true); err != nil {
			return err
		}
		gotQ, err = hasClsact(idx)
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	slices.Sort(gotIn)
	slices.Sort(gotEg)
	if !slices.Equal(gotIn, in) || !slices.Equal(gotEg, eg) || gotQ != clsact {
		t.Errorf("%s: ingress filters %q, egress %q, clsact %v; want %q, %q, %v", when, gotIn, gotEg, gotQ, in, eg, clsact)
	}
}

// TestTCAttach: a filter on each hook of B's interface, direct-action,
// runs for the packets B receives and sends; Close, called from the test's
// own namespace (not B's), removes both and the clsact qdisc attachTC made.
func TestTCAttach(t *testing.T) {
	pr, idx := tcHost(t)
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Fatalf("BPF_ENABLE_STATS: %v", err)
	}
	defer stats.Close()
	progIn, progEg := tcNoop(t), tcNoop(t)
	tcCheck(t, pr.B, idx, "before", nil, nil, false)
	in := tcAttachIn(t, pr.B, idx, progIn, false, "weir_test_in")
	eg := tcAttachIn(t, pr.B, idx, progEg, true, "weir_test_eg")
	if !in.qdisc || eg.qdisc {
		t.Errorf("qdisc created by ingress attach %v, by egress attach %v; want true, false", in.qdisc, eg.qdisc)
	}
	tcCheck(t, pr.B, idx, "attached", []string{"weir_test_in"}, []string{"weir_test_eg"}, true)
	if _, err := exec.LookPath("tc"); err == nil {
		for hook, name := range map[string]string{"ingress": "weir_test_in", "egress": "weir_test_eg"} {
			out, err := pr.B.Exec(context.Background(), "tc", "filter", "show", "dev", pr.B.Iface, hook)
			if s := string(out); err != nil || !strings.Contains(s, name) || !strings.Contains(s, "direct-action") || !strings.Contains(s, "pref 1 ") {
				t.Errorf("tc filter show %s: %v\n%s", hook, err, out)
			}
		}
	}

	before := [2]*ebpf.ProgramStats{}
	for i, p := range []*ebpf.Program{progIn, progEg} {
		if before[i], err = p.Stats(); err != nil {
			t.Fatal(err)
		}
	}
	const n = 200
	for _, d := range [][2]*testhost.Host{{pr.A, pr.B}, {pr.B, pr.A}} { // B receives n, then sends n
		if sent, recv, err := testhost.SendUDP(context.Background(), d[0], d[1], false, 0, n, 64); err != nil || sent != n || recv != n {
			t.Fatalf("SendUDP %s → %s: sent %d received %d: %v", d[0].Name, d[1].Name, sent, recv, err)
		}
	}
	for i, p := range []*ebpf.Program{progIn, progEg} {
		after, err := p.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if runs := after.RunCount - before[i].RunCount; runs < n {
			t.Errorf("%s program ran %d times for %d packets", [2]string{"ingress", "egress"}[i], runs, n)
		}
	}

	// Closed from this goroutine, in the test's namespace: Close enters B's.
	if err := eg.Close(); err != nil {
		t.Fatal(err)
	}
	tcCheck(t, pr.B, idx, "egress closed", []string{"weir_test_in"}, nil, true)
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	tcCheck(t, pr.B, idx, "both closed", nil, nil, false)
	if err := in.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestTCSharedQdisc: a clsact qdisc that attachTC did not create, or
// that holds other filters, is left in place with those filters; Close
// runs in the filters' namespace here.
func TestTCSharedQdisc(t *testing.T) {
	pr, idx := tcHost(t)
	prog := tcNoop(t)
	closeIn := func(f *tcFilter) {
		t.Helper()
		if err := pr.B.Do(f.Close); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("tc-made qdisc", func(t *testing.T) {
		if _, err := exec.LookPath("tc"); err != nil {
			t.Skip("no tc command")
		}
		if out, err := pr.B.Exec(context.Background(), "tc", "qdisc", "add", "dev", pr.B.Iface, "clsact"); err != nil {
			t.Fatalf("tc qdisc add: %v: %s", err, out)
		}
		f := tcAttachIn(t, pr.B, idx, prog, false, "weir_test")
		tcCheck(t, pr.B, idx, "attached", []string{"weir_test"}, nil, true)
		closeIn(f)
		tcCheck(t, pr.B, idx, "closed", nil, nil, true)
		if out, err := pr.B.Exec(context.Background(), "tc", "qdisc", "del", "dev", pr.B.Iface, "clsact"); err != nil {
			t.Fatalf("tc qdisc del: %v: %s", err, out)
		}
	})
	t.Run("other filter on the hook", func(t *testing.T) {
		tcCheck(t, pr.B, idx, "before", nil, nil, false)
		other := tcAttachIn(t, pr.B, idx, prog, false, "weir_other") // creates the qdisc
		ours := tcAttachIn(t, pr.B, idx, prog, false, "weir_ours")
		if ours.qdisc || ours.handle == other.handle {
			t.Errorf("second filter: qdisc created %v, handle %#x (first %#x)", ours.qdisc, ours.handle, other.handle)
		}
		tcCheck(t, pr.B, idx, "both attached", []string{"weir_other", "weir_ours"}, nil, true)
		closeIn(ours)
		tcCheck(t, pr.B, idx, "second closed", []string{"weir_other"}, nil, true)
		closeIn(other)
		tcCheck(t, pr.B, idx, "both closed", nil, nil, false)
	})
	t.Run("creator closed first", func(t *testing.T) {
		tcCheck(t, pr.B, idx, "before", nil, nil, false)
		first := tcAttachIn(t, pr.B, idx, prog, false, "weir_first")
		second := tcAttachIn(t, pr.B, idx, prog, true, "weir_second")
		closeIn(first)
		tcCheck(t, pr.B, idx, "first closed", nil, []string{"weir_second"}, true)
		closeIn(second)
		tcCheck(t, pr.B, idx, "second closed", nil, nil, true) // the qdisc is not second's to delete
	})
}

// TestTCAttachFail: a program the kernel refuses as a filter (a socket
// filter) leaves neither a filter nor the qdisc attachTC made for it.
func TestTCAttachFail(t *testing.T) {
	pr, idx := tcHost(t)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SocketFilter, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	noop := tcNoop(t)
	err = pr.B.Do(func() error {
		if f, err := attachTC(idx, prog, false, "weir_bad"); err == nil {
			f.Close()
			t.Error("attachTC of a socket filter succeeded")
		} else {
			t.Logf("attachTC of a socket filter: %v", err)
		}
		if _, err := attachTC(1<<20, noop, false, "weir_bad"); err == nil {
			t.Error("attachTC on a missing interface succeeded")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tcCheck(t, pr.B, idx, "after failures", nil, nil, false)
}

// TestAttachModes: a Source attached with TCX and one attached with
// clsact filters count the same UDP flows exactly; another tool's program
// attached after weir's on the same hooks still sees every packet (weir's
// programs hand packets on, they do not end the chain); and when Run
// returns no TCX program, no filter and no clsact qdisc of weir's is left.
func TestAttachModes(t *testing.T) {
	pr, idx := tcHost(t)
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Skipf("BPF_ENABLE_STATS: %v", err)
	}
	defer stats.Close()
	for i, mode := range []AttachMode{AttachTCX, AttachTC} {
		t.Run(string(mode), func(t *testing.T) {
			after := tcNoop(t) // another tool's program, after weir's on both hooks
			var in, eg []string
			if mode == AttachTC {
				// Filters of one priority run newest first: the other tool's
				// go on before weir's so that they run after them.
				tcAttachIn(t, pr.B, idx, after, false, "other")
				tcAttachIn(t, pr.B, idx, after, true, "other")
				in, eg = []string{"other"}, []string{"other"}
			}
			s, stop := start(t, pr.B, Config{Attach: mode}, pr.B.Iface)
			if mode == AttachTC {
				tcCheck(t, pr.B, idx, "while running", []string{"other", "weir"}, []string{"other", "weir"}, true)
			} else {
				for _, a := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
					if err := pr.B.Do(func() error {
						l, err := link.AttachTCX(link.TCXOptions{Interface: idx, Program: after, Attach: a, Anchor: link.Tail()})
						if err == nil {
							t.Cleanup(func() { l.Close() })
						}
						return err
					}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if n := attached(t, pr.B, pr.B.Iface); n != map[AttachMode]int{AttachTCX: 4, AttachTC: 0}[mode] {
				t.Errorf("%d TCX programs on %s", n, pr.B.Iface)
			}
			before, err := after.Stats()
			if err != nil {
				t.Fatal(err)
			}
			want := testhost.UDPFlows(t, pr.A, pr.B, false, 24000+i*1000, 200)
			recs := stop()
			testhost.CheckUDP(t, recs, pr.A, pr.B, false, want)
			got, err := after.Stats()
			if err != nil {
				t.Fatal(err)
			}
			var pkts uint64
			for _, w := range want {
				pkts += w[0] // B receives them
			}
			if runs := got.RunCount - before.RunCount; runs < pkts {
				t.Errorf("the program after weir's ran %d times for %d packets", runs, pkts)
			}
			if st := s.Stats(); st.Ifaces != 1 {
				t.Errorf("stats %+v", st)
			}
			tcCheck(t, pr.B, idx, "after Run", in, eg, mode == AttachTC) // only the other tool's are left
			if n := attached(t, pr.B, pr.B.Iface); n != map[AttachMode]int{AttachTCX: 2, AttachTC: 0}[mode] {
				t.Errorf("%d TCX programs on %s after Run returned", n, pr.B.Iface)
			}
		})
	}
}
