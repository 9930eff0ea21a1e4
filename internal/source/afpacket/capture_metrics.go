package afpacket

import (
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/packet"
)

// Metric descriptions; docs/metrics.md documents each (a test checks).
var (
	mIfPackets  = counter("weir_capture_packets_total", "Frames read from the rings of an interface.", "iface")
	mIfBytes    = counter("weir_capture_bytes_total", "Link-layer bytes (frame length on the wire) of the frames read from an interface.", "iface")
	mKPackets   = counter("weir_capture_kernel_packets_total", "Packets the kernel passed to the interface's sockets, dropped ones included (PACKET_STATISTICS tp_packets).", "iface")
	mKDrops     = counter("weir_capture_kernel_drops_total", "Packets the kernel dropped because a ring was full (tp_drops).", "iface")
	mKFreezes   = counter("weir_capture_kernel_ring_freezes_total", "Times a ring had no free block (tp_freeze_q_cnt).", "iface")
	mCorrupt    = counter("weir_capture_ring_corrupt_blocks_total", "Ring blocks abandoned because a frame header was inconsistent (should stay 0).", "iface")
	mIfOpen     = gauge("weir_capture_interface_open", "1 while the interface is captured, 0 after it was released.", "iface")
	mOpened     = counter("weir_capture_interfaces_opened_total", "Interfaces opened for capture, reopenings included.")
	mReleased   = counter("weir_capture_interfaces_released_total", "Interfaces released (deleted, down or failed).")
	mOpenFails  = counter("weir_capture_interface_open_failures_total", "Interfaces that matched the selection but could not be opened.")
	mWorkers    = gauge("weir_capture_workers", "Capture workers (each with its own flow table shard).")
	mDecFrames  = counter("weir_decoder_frames_total", "Frames passed to the decoder.")
	mDecoded    = counter("weir_decoder_packets_total", "Frames decoded into a flow packet, by IP version.", "version")
	mDecErrors  = counter("weir_decoder_errors_total", "Frames rejected by the decoder, by reason.", "reason")
	mNonIP      = counter("weir_decoder_non_ip_total", "Non-IP frames (ARP, LLDP, ...), counted and skipped.")
	mFrags      = counter("weir_decoder_fragments_total", "IP fragments by outcome: first (ports remembered), attributed, unattributed, evicted (fragment table entries overwritten).", "outcome")
	mCutHeaders = counter("weir_decoder_cut_headers_total", "IP packets whose IPv4 options or IPv6 extension headers the snap length cut, counted in a portless flow.")
	mDecap      = counter("weir_decoder_tunnel_packets_total", "Tunnel packets of the kinds --decap names, by tunnel and by what keyed them: inner (the packet inside) or outer (fragmented, or the inside not IP or unreadable).", "tunnel", "keyed_by")
	mActive     = gauge("weir_flow_active", "Flows in the tables now.")
	mCapacity   = gauge("weir_flow_table_capacity", "Flows the tables hold at most (--max-flows).")
	mTableBytes = gauge("weir_flow_table_bytes", "Bytes preallocated for the flow tables.")
	mFPackets   = counter("weir_flow_packets_total", "Packets given to the flow tables (duplicates included).")
	mDupes      = counter("weir_flow_duplicate_packets_total", "Packets ignored as copies of a packet already counted at another interface.")
	mCreated    = counter("weir_flow_created_total", "Flows started.")
	mRecords    = counter("weir_flow_records_total", "Records emitted, by end reason.", "reason")
	mEvicted    = counter("weir_flow_evictions_total", "Flows removed from the tables, by reason.", "reason")
	mFullPasses = counter("weir_flow_full_table_passes_total", "Passes evicting the stalest flows because a table was full.")
)

func counter(name, help string, labels ...string) *metrics.Desc {
	return &metrics.Desc{Name: name, Help: help, Type: metrics.Counter, Labels: labels}
}

func gauge(name, help string, labels ...string) *metrics.Desc {
	return &metrics.Desc{Name: name, Help: help, Type: metrics.Gauge, Labels: labels}
}

// collector renders a Capture's and its sink queues' counters.
type collector struct {
	c *Capture
}

// Collector returns a metrics.Collector for the capture. Values are the
// workers' last published counters (every Tick).
func (c *Capture) Collector() metrics.Collector { return &collector{c: c} }

// Describe lists every metric the collector emits.
func (col *collector) Describe() []*metrics.Desc {
	return append([]*metrics.Desc{}, mIfPackets, mIfBytes, mKPackets, mKDrops, mKFreezes, mCorrupt, mIfOpen,
		mOpened, mReleased, mOpenFails, mWorkers, mDecFrames, mDecoded, mDecErrors, mNonIP, mFrags, mCutHeaders, mDecap,
		mActive, mCapacity, mTableBytes, mFPackets, mDupes, mCreated, mRecords, mEvicted, mFullPasses)
}

// Collect writes the current values.
func (col *collector) Collect(w *metrics.Writer) {
	st := col.c.Stats()
	for _, f := range st.Ifaces {
		w.Sample(mIfPackets, float64(f.Packets), f.Name)
		w.Sample(mIfBytes, float64(f.Bytes), f.Name)
		w.Sample(mKPackets, float64(f.Kernel.Packets), f.Name)
		w.Sample(mKDrops, float64(f.Kernel.Drops), f.Name)
		w.Sample(mKFreezes, float64(f.Kernel.FreezeQueue), f.Name)
		w.Sample(mCorrupt, float64(f.Kernel.Corrupt), f.Name)
		open := 0.0
		if f.Open {
			open = 1
		}
		w.Sample(mIfOpen, open, f.Name)
	}
	w.Sample(mOpened, float64(st.Opened))
	w.Sample(mReleased, float64(st.Released))
	w.Sample(mOpenFails, float64(st.OpenFails))
	w.Sample(mWorkers, float64(st.Workers))
	d := &st.Decoder
	w.Sample(mDecFrames, float64(d.Frames))
	w.Sample(mDecoded, float64(d.IPv4), "4")
	w.Sample(mDecoded, float64(d.IPv6), "6")
	for i, n := range d.Errors {
		w.Sample(mDecErrors, float64(n), packet.Reason(i).String())
	}
	w.Sample(mNonIP, float64(d.NonIP))
	w.Sample(mFrags, float64(d.Fragments.First), "first")
	w.Sample(mFrags, float64(d.Fragments.Attributed), "attributed")
	w.Sample(mFrags, float64(d.Fragments.Unattributed), "unattributed")
	w.Sample(mFrags, float64(d.Fragments.Evicted), "evicted")
	w.Sample(mCutHeaders, float64(d.CutHeaders))
	for i := range d.Decap.Inner {
		w.Sample(mDecap, float64(d.Decap.Inner[i]), packet.Tunnel(i).String(), "inner")
		w.Sample(mDecap, float64(d.Decap.Outer[i]), packet.Tunnel(i).String(), "outer")
	}
	t := &st.Table
	w.Sample(mActive, float64(st.Flows))
	w.Sample(mCapacity, float64(st.TableCap))
	w.Sample(mTableBytes, float64(st.TableMem))
	w.Sample(mFPackets, float64(t.Packets))
	w.Sample(mDupes, float64(t.Duplicates))
	w.Sample(mCreated, float64(t.FlowsCreated))
	for r := flow.ReasonIdle; int(r) < flow.NumReasons; r++ {
		w.Sample(mRecords, float64(t.Records[r]), r.String())
		w.Sample(mEvicted, float64(t.Evicted[r]), r.String())
	}
	w.Sample(mFullPasses, float64(t.FullPasses))
}
