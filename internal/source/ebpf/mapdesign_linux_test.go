//go:build linux

package ebpf

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/testhost"
)

// mapDesigns are the variants in testdata/variants.o (bpf/variants.c):
// how the programs count into the flow map.
var mapDesigns = []string{"atomic", "spinlock", "percpu"}

// BenchmarkMapDesign measures the map designs the kernel program could
// use, on flow.c's parser, key and value size: one global hash with atomic
// adds (weir's), one global hash with a bpf_spin_lock per value, and a
// per-CPU hash; each preallocated or not (BPF_F_NO_PREALLOC).
// ns/op is the program's kernel run time per packet (BPF stats; the empty
// program's ~45 ns floor included), as in BenchmarkKernel. BenchmarkMapDrain
// measures the same designs' drain.
func BenchmarkMapDesign(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("eBPF needs root")
	}
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		b.Skip("testdata/variants.o is little-endian")
	}
	spec, err := ebpf.LoadCollectionSpec("testdata/variants.o")
	if err != nil {
		b.Fatal(err)
	}
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Skipf("BPF_ENABLE_STATS: %v", err)
	}
	defer stats.Close()
	pr := testhost.NewPair(b)
	send := rawSender(b, pr.A, pr.B)
	for _, d := range mapDesigns {
		for _, prealloc := range []bool{true, false} {
			pa := map[bool]string{true: "prealloc", false: "noprealloc"}[prealloc]
			for _, flows := range []int{64, 16384} {
				b.Run(fmt.Sprintf("%s/%s/flows=%d", d, pa, flows), func(b *testing.B) {
					coll := variant(b, spec, d, 65536, prealloc)
					prog := coll.Programs["weir_var_"+d]
					ingress(b, pr.B, prog)
					kernelCost(b, prog, send, flows)
					// ≥: the veth's own IPv6 neighbour traffic adds a flow or two.
					if n := entries(b, coll.Maps["v_"+d]); n < min(flows, b.N) {
						b.Fatalf("the map holds %d flows, want %d", n, min(flows, b.N))
					}
				})
			}
		}
	}
}

// BenchmarkMapDrain measures draining each design's map (see
// BenchmarkMapDesign): ns/op is one batch lookup-and-delete of 100,000
// entries through raw syscalls (8,192 entries per call; filling the map
// is untimed), so a library's decoding of per-CPU values is not in it;
// bytes-per-entry is what the kernel copies out per entry.
func BenchmarkMapDrain(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("eBPF needs root")
	}
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		b.Skip("testdata/variants.o is little-endian")
	}
	spec, err := ebpf.LoadCollectionSpec("testdata/variants.o")
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range mapDesigns {
		for _, prealloc := range []bool{true, false} {
			pa := map[bool]string{true: "prealloc", false: "noprealloc"}[prealloc]
			b.Run(fmt.Sprintf("%s/%s/entries=100k", d, pa), func(b *testing.B) {
				const n = 100_000
				coll := variant(b, spec, d, n, prealloc)
				drainCost(b, coll.Maps["v_"+d], n, unix.BPF_MAP_LOOKUP_AND_DELETE_BATCH, 8192)
			})
		}
	}
	// weir's design, other ways: one call for all entries; lookup only
	// (the map would be replaced, not emptied); a fresh map's creation.
	b.Run("atomic/prealloc/entries=100k/batch=all", func(b *testing.B) {
		coll := variant(b, spec, "atomic", 100_000, true)
		drainCost(b, coll.Maps["v_atomic"], 100_000, unix.BPF_MAP_LOOKUP_AND_DELETE_BATCH, 100_000)
	})
	b.Run("atomic/prealloc/entries=100k/lookup-only", func(b *testing.B) {
		coll := variant(b, spec, "atomic", 100_000, true)
		drainCost(b, coll.Maps["v_atomic"], 100_000, unix.BPF_MAP_LOOKUP_BATCH, 8192)
	})
	b.Run("atomic/prealloc/entries=100k/create", func(b *testing.B) {
		ms := spec.Maps["v_atomic"].Copy()
		ms.MaxEntries = 100_000
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var cpu time.Duration
		for b.Loop() {
			c0 := clockNow(unix.CLOCK_THREAD_CPUTIME_ID)
			m, err := ebpf.NewMap(ms)
			cpu += clockNow(unix.CLOCK_THREAD_CPUTIME_ID) - c0
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			m.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
	})
}

// variant loads the program and map of design d with maps of n entries.
func variant(b *testing.B, spec *ebpf.CollectionSpec, d string, n int, prealloc bool) *ebpf.Collection {
	b.Helper()
	spec = spec.Copy()
	for name := range spec.Programs {
		if name != "weir_var_"+d {
			delete(spec.Programs, name)
		}
	}
	for name, m := range spec.Maps {
		if name != "v_"+d && name != ".rodata" {
			delete(spec.Maps, name)
			continue
		}
		if name == "v_"+d {
			m.MaxEntries = uint32(n)
			if !prealloc {
				m.Flags |= unix.BPF_F_NO_PREALLOC
			}
		}
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(coll.Close)
	return coll
}

// entries counts m's keys.
func entries(b *testing.B, m *ebpf.Map) int {
	var k [40]byte
	n := 0
	for err := m.NextKey(nil, &k); err == nil; err = m.NextKey(&k, &k) {
		n++
	}
	return n
}

// batchAttr is the kernel's union bpf_attr for the batch commands.
type batchAttr struct {
	inBatch, outBatch, keys, values uint64
	count, mapFD                    uint32
	elemFlags, flags                uint64
}

// drainCost times batch lookup-and-delete of m after filling it with n
// entries, b.N times, through the raw syscall: what the kernel costs,
// without a library's decoding of per-CPU values.
func drainCost(b *testing.B, m *ebpf.Map, n int, cmd uintptr, batch int) {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		b.Fatal(err)
	}
	copies := 1
	if m.Type() == ebpf.PerCPUHash {
		copies = ncpu
	}
	vsize := int(m.ValueSize()+7) &^ 7
	keys := make([]byte, batch*40)
	vals := make([]byte, batch*vsize*copies)
	fillK, fillV := fillVariant(b, n, int(m.ValueSize()), copies)
	var cursor uint32
	// The thread's CPU time, not only the wall time: the machine is shared.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		if err := fillRaw(m, fillK, fillV, n); err != nil {
			b.Fatal(err)
		}
		c0 := clockNow(unix.CLOCK_THREAD_CPUTIME_ID)
		b.StartTimer()
		got := 0
		for first := true; ; first = false {
			a := batchAttr{outBatch: uint64(uintptr(unsafe.Pointer(&cursor))), keys: uint64(uintptr(unsafe.Pointer(&keys[0]))),
				values: uint64(uintptr(unsafe.Pointer(&vals[0]))), count: uint32(batch), mapFD: uint32(m.FD())}
			if !first {
				a.inBatch = a.outBatch
			}
			_, _, errno := unix.Syscall(unix.SYS_BPF, cmd, uintptr(unsafe.Pointer(&a)), unsafe.Sizeof(a))
			runtime.KeepAlive(keys)
			runtime.KeepAlive(vals)
			got += int(a.count)
			if errno == unix.ENOENT {
				break
			}
			if errno != 0 {
				b.Fatalf("lookup-and-delete batch: %v", errno)
			}
		}
		b.StopTimer()
		cpu += clockNow(unix.CLOCK_THREAD_CPUTIME_ID) - c0
		b.StartTimer()
		if got != n {
			b.Fatalf("drained %d entries, want %d", got, n)
		}
	}
	b.ReportMetric(float64(40+vsize*copies), "bytes-per-entry")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
}

// fillVariant makes n distinct keys and values (copies per-CPU copies each)
// of vsize bytes with a nonzero count.
func fillVariant(b *testing.B, n, vsize, copies int) ([]byte, []byte) {
	keys, vals := make([]byte, n*40), make([]byte, n*vsize*copies)
	for i := range n {
		k := keys[i*40:]
		src := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).As16()
		copy(k, src[:])
		k[16+15] = 1
		binary.NativeEndian.PutUint16(k[32:], uint16(i))
		k[36] = 17
		for c := range copies {
			binary.NativeEndian.PutUint64(vals[(i*copies+c)*vsize+8:], 1)
		}
	}
	return keys, vals
}

// fillRaw inserts n entries with batch updates (one, unless the kernel
// refuses part of it for memory; see below).
func fillRaw(m *ebpf.Map, keys, vals []byte, n int) error {
	ks, vs := len(keys)/n, len(vals)/n // bytes per entry in each buffer
	done := 0
	// A map without preallocation takes its per-CPU values from the kernel's
	// per-CPU allocator, which may refuse (ENOMEM) while it populates more
	// chunks in the background: go on from the entry it stopped at, a bounded
	// number of times, so that the drain is measured and not the allocator.
	for retry := 0; ; retry++ {
		a := batchAttr{keys: uint64(uintptr(unsafe.Pointer(&keys[done*ks]))), values: uint64(uintptr(unsafe.Pointer(&vals[done*vs]))),
			count: uint32(n - done), mapFD: uint32(m.FD())}
		_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_MAP_UPDATE_BATCH, uintptr(unsafe.Pointer(&a)), unsafe.Sizeof(a))
		runtime.KeepAlive(keys)
		runtime.KeepAlive(vals)
		done += int(a.count)
		if errno == 0 {
			return nil
		}
		if errno != unix.ENOMEM || done >= n || retry == 200 {
			return fmt.Errorf("update batch: %w (%d of %d, after %d retries)", errno, done, n, retry)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// clockNow reads clock id (a CPU-time clock) as a duration.
func clockNow(id int32) time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(id, &ts) // the CPU-time clocks always exist on Linux
	return time.Duration(ts.Nano())
}
