//go:build linux

package ebpf

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	"github.com/weir-dev/weir/internal/flow"
)

// Drops (Config.Drops): the weir_drops program on skb:kfree_skb adds the
// packets the kernel drops in watched namespaces to their flow's entry
// (drop_packets, drop_bytes, drop_reason). Draining hands each entry's
// packets to the table as usual and its drops to dropsOf, which holds
// them until the table emits a record of that flow (they go on it); drops
// of a flow the table does not hold (all its packets were dropped before
// a watched interface saw them, or its flow has ended) become a record of
// their own with no packets.

// maxHeldDrops bounds the flows whose drops wait for their flow's record;
// past it, drops become records of their own at once.
const maxHeldDrops = 1 << 16

// reasonSubsystem is drop_reason for a subsystem's reason (a value past
// 16 bits): the program stores 0xffff.
const reasonSubsystem = 0xffff

// heldDrop is what was dropped of one flow since its last record.
type heldDrop struct {
	packets, bytes uint64
	reason         uint16
	first, last    int64  // Unix ns of the entries that carried the drops
	iface          uint16 // flow.Ifaces index of the dropping device, if watched
	hasIface       bool
}

// dropState is the Source's drop bookkeeping.
type dropState struct {
	names   map[uint16]string // skb_drop_reason values → names ("NO_SOCKET")
	pending []pendingDrop     // drained this drain, not yet placed
	held    map[flow.Key]*heldDrop
}

// pendingDrop is a drained entry's drops with its key (packet orientation).
type pendingDrop struct {
	key flow.Key
	d   heldDrop
}

// dropReasonNames reads the kernel's skb_drop_reason names from its BTF,
// and the value of SKB_CONSUMED (a free that is no drop; 0xffffffff if
// the kernel has none).
func dropReasonNames() (map[uint16]string, uint32, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, 0, fmt.Errorf("ebpf: the kernel's BTF: %w", err)
	}
	var e *btf.Enum
	if err := spec.TypeByName("skb_drop_reason", &e); err != nil {
		return nil, 0, fmt.Errorf("ebpf: this kernel names no drop reasons (skb_drop_reason): %w", err)
	}
	names := make(map[uint16]string, len(e.Values))
	consumed := uint32(0xffffffff)
	for _, v := range e.Values {
		switch {
		case v.Name == "SKB_CONSUMED":
			consumed = uint32(v.Value)
		case strings.HasPrefix(v.Name, "SKB_DROP_REASON_") && v.Value < reasonSubsystem:
			names[uint16(v.Value)] = strings.TrimPrefix(v.Name, "SKB_DROP_REASON_")
		}
	}
	return names, consumed, nil
}

// reasonName names a drop_reason value.
func (d *dropState) reasonName(r uint16) string {
	if n, ok := d.names[r]; ok {
		return n
	}
	if r == reasonSubsystem {
		return "SUBSYSTEM"
	}
	return fmt.Sprintf("REASON_%d", r)
}

// attachDrops attaches weir_drops to the kfree_skb raw tracepoint (one
// for every namespace: the program keeps to those in the watched map).
func (s *Source) attachDrops() error {
	p := s.coll.Programs["weir_drops"]
	if p == nil {
		return nil
	}
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "kfree_skb", Program: p})
	if err != nil {
		return fmt.Errorf("ebpf: attaching to the kfree_skb tracepoint (drop reasons need Linux 5.17+): %w", err)
	}
	s.links = append(s.links, l)
	return nil
}

// watch adds a namespace to the drop program's watched set.
func (s *Source) watch(netns uint64) error {
	if s.coll.Programs["weir_drops"] == nil {
		return nil
	}
	if err := s.coll.Maps["watched"].Update(netns, uint8(1), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("ebpf: watching a namespace's drops: %w", err)
	}
	return nil
}

// noteDrops keeps a drained entry's drops for placeDrops (called by the
// drain's helper goroutine, which alone touches d.pending meanwhile).
func (s *Source) noteDrops(a *flow.Aggregate, v *flowFlowVal) {
	p := pendingDrop{key: a.Key, d: heldDrop{
		packets: uint64(v.DropPackets), bytes: v.DropBytes, reason: v.DropReason,
		first: a.First, last: a.Time,
	}}
	if i, ok := s.ifaces[ifKey{v.Netns, v.Ifindex}]; ok && v.Ifindex != 0 {
		p.d.iface, p.d.hasIface = i, true
	}
	s.drops.pending = append(s.drops.pending, p)
}

// placeDrops runs after a drain has added its entries to the table:
// drops held for flows the table no longer holds become records; the
// drain's drops are held for their flow's next record, or become records
// if the table does not hold the flow (or too many are held).
func (s *Source) placeDrops() {
	d := &s.drops
	for k, h := range d.held {
		if !s.table.Contains(&k) {
			s.dropRecord(k, h, flow.ReasonIdle)
			delete(d.held, k)
		}
	}
	for i := range d.pending {
		p := &d.pending[i]
		k := normKey(p.key)
		if h, ok := d.held[k]; ok {
			h.packets += p.d.packets
			h.bytes += p.d.bytes
			h.reason = p.d.reason
			h.first, h.last = min(h.first, p.d.first), max(h.last, p.d.last)
			continue
		}
		if len(d.held) < maxHeldDrops && s.table.Contains(&p.key) {
			h := p.d
			d.held[k] = &h
			continue
		}
		s.dropRecord(p.key, &p.d, flow.ReasonActive)
	}
	d.pending = d.pending[:0]
}

// flushDrops turns every held drop into a record (shutdown, after the
// table's flush placed what it could).
func (s *Source) flushDrops() {
	for k, h := range s.drops.held {
		s.dropRecord(k, h, flow.ReasonShutdown)
		delete(s.drops.held, k)
	}
}

// dropRecord emits a record of drops alone.
func (s *Source) dropRecord(k flow.Key, h *heldDrop, r flow.EndReason) {
	rec := flow.Record{Key: k, EndReason: r, Start: h.first, End: max(h.last, h.first),
		DropPackets: h.packets, DropBytes: h.bytes, DropReason: s.drops.reasonName(h.reason)}
	if h.hasIface {
		rec.Iface = s.names.Name(h.iface)
	}
	s.emit(&rec, true)
}

// attachHeld puts the drops held for r's flow on r.
func (s *Source) attachHeld(r *flow.Record) {
	k := normKey(r.Key)
	h, ok := s.drops.held[k]
	if !ok {
		return
	}
	r.DropPackets, r.DropBytes, r.DropReason = h.packets, h.bytes, s.drops.reasonName(h.reason)
	delete(s.drops.held, k)
}

// normKey orients k with the lower endpoint (address, then port) first,
// so both directions of a flow give one map key.
func normKey(k flow.Key) flow.Key {
	c := bytes.Compare(k.SrcAddr[:], k.DstAddr[:])
	if c > 0 || c == 0 && k.SrcPort > k.DstPort {
		k.SrcAddr, k.DstAddr, k.SrcPort, k.DstPort = k.DstAddr, k.SrcAddr, k.DstPort, k.SrcPort
	}
	return k
}

// dropReasons is the size of the drop_reasons map (DROP_REASONS in
// flow.c): reasons 0-254 by value, the rest in the last.
const dropReasons = 256
