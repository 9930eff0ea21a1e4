package ebpf

import (
	"maps"
	"slices"

	"github.com/weir-dev/weir/internal/metrics"
)

// Metric descriptions; docs/metrics.md documents each (a test checks).
var (
	mPackets    = counter("weir_ebpf_packets_total", "Packets the eBPF programs looked at, at every interface (copies included).")
	mNotIP      = counter("weir_ebpf_non_ip_packets_total", "Packets that were not IPv4/IPv6 or too short to key: skipped.")
	mDupes      = counter("weir_ebpf_duplicate_packets_total", "Copies of a packet seen at a second interface: not counted again.")
	mSampledOut = counter("weir_ebpf_sampled_out_packets_total", "Packets skipped by sampling (--sampling).")
	mInsertFail = counter("weir_ebpf_map_insert_failures_total", "Packets whose flow could not get a kernel map entry, by errno (E2BIG: the map was full); they go to the overflow ring.", "errno")
	mRing       = counter("weir_ebpf_ringbuf_packets_total", "Packets sent to user space through the overflow ring.")
	mRingRead   = counter("weir_ebpf_ringbuf_read_total", "Overflow ring records read by user space.")
	mLost       = counter("weir_ebpf_lost_packets_total", "Packets neither in the map nor in the ring (the ring was full or off): not counted in any flow. Should stay 0.")
	mFrags      = counter("weir_ebpf_fragments_total", "IP fragments by outcome: first (ports remembered), attributed, unattributed.", "outcome")
	mEvictions  = counter("weir_ebpf_evictions_total", "Drains by source (hashmap, ringbuf) and reason (timer, full, shutdown).", "source", "reason")
	mEvicted    = counter("weir_ebpf_evicted_flows_total", "Flow entries drained into the flow table, by source and reason.", "source", "reason")
	mEntries    = gauge("weir_ebpf_map_entries", "Entries in the active kernel flow map now.")
	mCapacity   = gauge("weir_ebpf_map_capacity", "Entries a kernel flow map holds (--ebpf-max-flows).")
	mRatio      = gauge("weir_ebpf_ringbuf_ratio", "Flows drained from the overflow ring per flow drained from the kernel map, since start.")
	mIfaces     = gauge("weir_ebpf_interfaces", "Interfaces with the programs attached (ingress and egress).")
	mRecords    = counter("weir_ebpf_records_total", "Flow records handed to the sinks.")
	mDropped    = counter("weir_ebpf_dropped_packets_total", "Packets the kernel dropped in the watched namespaces (--ebpf-drops), by the kernel's drop reason (OTHER: reasons past 254).", "reason")
	mDropFlows  = counter("weir_ebpf_drop_attribution_total", "Dropped packets by whether they were put on a flow (attributed) or not: map_full (no entry for the flow), unkeyed (not IP, or no network header).", "outcome")
	mDuration   = &metrics.Desc{Name: "weir_ebpf_evict_duration_seconds", Help: "Time to swap the kernel map and drain it (batch lookup-and-delete).", Type: metrics.Histogram}
)

func counter(name, help string, labels ...string) *metrics.Desc {
	return &metrics.Desc{Name: name, Help: help, Type: metrics.Counter, Labels: labels}
}

func gauge(name, help string, labels ...string) *metrics.Desc {
	return &metrics.Desc{Name: name, Help: help, Type: metrics.Gauge, Labels: labels}
}

// Collector returns a metrics.Collector for the source's counters.
func (s *Source) Collector() metrics.Collector { return &collector{stats: s.Stats} }

type collector struct {
	stats func() Stats
}

// Describe lists every metric the collector emits.
func (c *collector) Describe() []*metrics.Desc {
	return append([]*metrics.Desc{}, mPackets, mNotIP, mDupes, mSampledOut, mInsertFail, mRing, mRingRead, mLost,
		mFrags, mEvictions, mEvicted, mEntries, mCapacity, mRatio, mIfaces, mRecords, mDropped, mDropFlows, mDuration)
}

// Collect writes the current values.
func (c *collector) Collect(w *metrics.Writer) {
	st := c.stats()
	w.Sample(mPackets, float64(st.Packets))
	w.Sample(mNotIP, float64(st.NotIP))
	w.Sample(mDupes, float64(st.Duplicates))
	w.Sample(mSampledOut, float64(st.SampledOut))
	w.Sample(mInsertFail, float64(st.InsertE2BIG), "E2BIG")
	w.Sample(mInsertFail, float64(st.InsertENOMEM), "ENOMEM")
	w.Sample(mInsertFail, float64(st.InsertOther), "other")
	w.Sample(mRing, float64(st.Ring))
	w.Sample(mRingRead, float64(st.RingRead))
	w.Sample(mLost, float64(st.Lost))
	w.Sample(mFrags, float64(st.FragFirst), "first")
	w.Sample(mFrags, float64(st.FragFound), "attributed")
	w.Sample(mFrags, float64(st.FragMissing), "unattributed")
	var flows [NumSources]uint64
	for src := range NumSources {
		for r := range NumReasons {
			w.Sample(mEvictions, float64(st.Evictions[src][r]), SourceNames[src], ReasonNames[r])
			w.Sample(mEvicted, float64(st.Evicted[src][r]), SourceNames[src], ReasonNames[r])
			flows[src] += st.Evicted[src][r]
		}
	}
	w.Sample(mEntries, float64(st.Occupancy()))
	w.Sample(mCapacity, float64(st.Capacity))
	ratio := 0.0
	if flows[SourceHashmap] > 0 {
		ratio = float64(flows[SourceRingbuf]) / float64(flows[SourceHashmap])
	}
	w.Sample(mRatio, ratio)
	w.Sample(mIfaces, float64(st.Ifaces))
	w.Sample(mRecords, float64(st.Records))
	for _, r := range slices.Sorted(maps.Keys(st.DropReasons)) {
		w.Sample(mDropped, float64(st.DropReasons[r]), r)
	}
	w.Sample(mDropFlows, float64(st.Drops), "attributed")
	w.Sample(mDropFlows, float64(st.DropsLost), "map_full")
	w.Sample(mDropFlows, float64(st.DropsUnkeyed), "unkeyed")
	w.Histogram(mDuration, EvictBuckets, st.EvictHist[:], st.EvictTime.Seconds())
}
