package ebpf

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/rusage"
)

// privilegeHint says what a permission error needs.
func privilegeHint(err error) error {
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("%w\nthe eBPF source needs root or CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON", err)
	}
	return err
}

// WriteStats writes the source's --stats lines.
func (s *Source) WriteStats(w io.Writer) {
	n := format.Count
	st := s.Stats()
	fmt.Fprintf(w, "ebpf        %d interfaces; %s packets, %s duplicates, %s not IP, %s sampled out\n",
		st.Ifaces, n(st.Packets), n(st.Duplicates), n(st.NotIP), n(st.SampledOut))
	fmt.Fprintf(w, "kernel map  %s entries of %s now; %s inserts; full: %s packets (ENOMEM %s, other %s)\n",
		n(st.Occupancy()), n(uint64(st.Capacity)), n(st.MapInserts), n(st.InsertE2BIG), n(st.InsertENOMEM), n(st.InsertOther))
	fmt.Fprintf(w, "overflow    %s packets through the ring, %s read, %s lost\n", n(st.Ring), n(st.RingRead), n(st.Lost))
	for src := range NumSources {
		var parts []string
		for r := range NumReasons {
			parts = append(parts, fmt.Sprintf("%s %s (%s flows)", ReasonNames[r], n(st.Evictions[src][r]), n(st.Evicted[src][r])))
		}
		fmt.Fprintf(w, "drains      %-8s %s\n", SourceNames[src], strings.Join(parts, ", "))
	}
	var drains uint64
	for _, c := range st.EvictHist {
		drains += c
	}
	if drains > 0 {
		fmt.Fprintf(w, "drain time  %s total, %s mean, %s last; batch deletes %v\n",
			st.EvictTime.Round(time.Microsecond), (st.EvictTime / time.Duration(drains)).Round(time.Microsecond), st.EvictLast.Round(time.Microsecond), st.BatchDeletes)
	}
	fmt.Fprintf(w, "fragments   %s first, %s attributed, %s unattributed\n", n(st.FragFirst), n(st.FragFound), n(st.FragMissing))
	if st.DropReasons != nil {
		parts := []string{}
		if len(st.DropReasons) == 0 {
			parts = append(parts, "none")
		}
		for _, r := range slices.Sorted(maps.Keys(st.DropReasons)) {
			parts = append(parts, fmt.Sprintf("%s %s", r, n(st.DropReasons[r])))
		}
		fmt.Fprintf(w, "drops       %s on flows, %s not (map full %s, unkeyed %s); by reason: %s\n",
			n(st.Drops), n(st.DropsLost+st.DropsUnkeyed), n(st.DropsLost), n(st.DropsUnkeyed), strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "records     %s\n", n(st.Records))
	rusage.WriteMemory(w, format.Bytes)
}
