//go:build linux

package ebpf

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"
)

// maxSpill bounds the overflow aggregate (about 200 bytes an entry): when
// it is full it goes into the flow table at once, without a map drain.
const maxSpill = 16384

// spill aggregates the overflow ring's packets as the kernel map would:
// same key, same value, same dedup rule. The ring reader fills cur; the
// drain swaps it for the empty spare under mu.
type spill struct {
	mu       sync.Mutex
	taken    *sync.Cond // signalled when a full cur has been swapped out
	cur      map[flowFlowKey]flowFlowVal
	spare    map[flowFlowKey]flowFlowVal
	limit    int
	carry    carry         // as the programs count (Config.carry)
	read     uint64        // ring records read (under mu)
	pressure chan struct{} // a record arrived (buffered 1: a hint, not a count)
	stopping atomic.Bool
}

func (sp *spill) init(limit int, c carry) {
	sp.limit, sp.carry = max(limit, 1), c
	sp.cur, sp.spare = map[flowFlowKey]flowFlowVal{}, map[flowFlowKey]flowFlowVal{}
	sp.taken = sync.NewCond(&sp.mu)
	sp.pressure = make(chan struct{}, 1)
}

func (sp *spill) full() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.cur) >= sp.limit
}

// readRing reads the overflow ring into the spill until stopRing flushes
// it. Records are copied out in runs of up to 64 and added under one lock.
func (s *Source) readRing() error {
	var rec ringbuf.Record
	var run [64]flowOverflowRec
	sp := &s.sp
	for {
		n := 0
		var err error
		for n < len(run) {
			if n > 0 && s.ring.AvailableBytes() == 0 {
				break // nothing more now: add what we have rather than block
			}
			if err = s.ring.ReadInto(&rec); err != nil {
				break
			}
			if len(rec.RawSample) >= int(unsafe.Sizeof(flowOverflowRec{})) {
				run[n] = *(*flowOverflowRec)(unsafe.Pointer(&rec.RawSample[0])) // the kernel's layout; samples are 8-byte aligned
				n++
			}
		}
		if n > 0 {
			sp.mu.Lock()
			for i := range run[:n] {
				for len(sp.cur) >= sp.limit {
					if _, ok := sp.cur[run[i].Key]; ok {
						break
					}
					select { // ask the drain to take it, and wait
					case sp.pressure <- struct{}{}:
					default:
					}
					sp.taken.Wait()
				}
				sp.add(&run[i])
			}
			sp.read += uint64(n)
			sp.mu.Unlock()
			select {
			case sp.pressure <- struct{}{}:
			default:
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, ringbuf.ErrFlushed):
			if sp.stopping.Load() {
				return nil
			}
		default:
			return fmt.Errorf("ebpf: reading the overflow ring: %w", err)
		}
	}
}

// add adds one packet to cur as the kernel adds one to the map; mu is held.
func (sp *spill) add(r *flowOverflowRec) {
	v, ok := sp.cur[r.Key]
	if !ok {
		v.FirstNs, v.LastJ = r.Ts, r.J
		v.Netns, v.Ifindex, v.Egress = r.Netns, r.Ifindex, r.Egress
	}
	if v.Ifindex != r.Ifindex || v.Netns != r.Netns {
		v.addOther(r.Netns, r.Ifindex, r.Len)
	} else {
		sp.carry.add(&v, r.Len)
		v.FirstNs = min(v.FirstNs, r.Ts)
		v.LastJ = max(v.LastJ, r.J)
		v.Marks |= uint32(r.Flags) | uint32(r.Role)<<8
	}
	sp.cur[r.Key] = v
}

// addOther is the kernel's other(): a copy seen at another interface.
func (v *flowFlowVal) addOther(netns uint64, ifindex, length uint32) {
	for i := range v.Other {
		o := &v.Other[i]
		if o.Ifindex == 0 {
			o.Netns, o.Ifindex = netns, ifindex
		}
		if o.Ifindex == ifindex && o.Netns == netns {
			o.Packets++
			o.Bytes += uint64(length)
			return
		}
	}
	if v.Nother < 255 {
		v.Nother++
	}
}

// takeSpill swaps out the ring's aggregate and adds it to the table.
func (s *Source) takeSpill(reason int) {
	sp := &s.sp
	sp.mu.Lock()
	m := sp.cur
	sp.cur, sp.spare = sp.spare, nil
	read := sp.read
	sp.taken.Broadcast()
	sp.mu.Unlock()
	n := len(m)
	for k, v := range m {
		s.add(&k, &v)
	}
	clear(m) // keeps its buckets for the next swap
	sp.mu.Lock()
	sp.spare = m
	sp.mu.Unlock()
	s.mu.Lock()
	s.stats.RingRead = read
	if n > 0 {
		s.stats.Evictions[SourceRingbuf][reason]++
		s.stats.Evicted[SourceRingbuf][reason] += uint64(n)
	}
	s.mu.Unlock()
}
