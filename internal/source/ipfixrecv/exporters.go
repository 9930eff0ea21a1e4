package ipfixrecv

import (
	"maps"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/ipfix"
)

// ExporterLoss is what one exporter address's sequence numbers said.
type ExporterLoss struct {
	Gaps    uint64 // messages whose number was not the expected one
	Records uint64 // data records lost (IPFIX, NetFlow v5)
	Packets uint64 // export packets lost (NetFlow v9 numbers packets)
}

// exporters keeps what is counted per exporter address: sequence losses
// and the interface names each introduced. The first max addresses get
// an entry of their own; later ones share OtherExporter's losses, and
// their names are bounded only by maxNames in all, so the table (and the
// metrics' label set) stays bounded.
type exporters struct {
	max, maxNames, perExporter int

	mu    sync.Mutex
	by    map[netip.Addr]*exporter
	names map[string]struct{} // every name passed on

	otherPer, otherGlobal atomic.Uint64 // records given flow.OtherIface, by bound
}

type exporter struct {
	loss  ExporterLoss
	names map[string]struct{} // the names it introduced (at most perExporter)
}

func (e *exporters) init(max, maxNames, perExporter int) {
	e.max, e.maxNames, e.perExporter = max, maxNames, perExporter
	e.by, e.names = map[netip.Addr]*exporter{}, map[string]struct{}{}
}

// entry is a's entry, or the shared one past the bound; under e.mu.
func (e *exporters) entry(a netip.Addr) *exporter {
	a = a.Unmap()
	x := e.by[a]
	if x == nil {
		if len(e.by) >= e.max {
			a = OtherExporter
			if x = e.by[a]; x != nil {
				return x
			}
		}
		x = &exporter{}
		e.by[a] = x
	}
	return x
}

// gap counts a sequence gap of exporter a and what it lost.
func (e *exporters) gap(a netip.Addr, lost ipfix.Loss) {
	e.mu.Lock()
	x := e.entry(a)
	x.loss.Gaps++
	x.loss.Records += lost.Records
	x.loss.Packets += lost.Packets
	e.mu.Unlock()
}

// nameRefusal is why admit gave a record flow.OtherIface.
type nameRefusal uint8

const (
	nameOK nameRefusal = iota
	namePerExporter
	nameGlobal
)

// admit returns what interface name a record of exporter a named name
// carries: name, or flow.OtherIface once a introduced perExporter names
// (a of the first max exporters) or maxNames are in use.
func (e *exporters) admit(a netip.Addr, name string) (string, nameRefusal) {
	if name == "" || name == flow.OtherIface {
		return name, nameOK
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.entry(a)
	if x == e.by[OtherExporter] {
		x = nil // past the bound: only the bound in all applies
	}
	if x != nil {
		if _, ok := x.names[name]; ok {
			return name, nameOK
		}
		if len(x.names) >= e.perExporter {
			return flow.OtherIface, namePerExporter
		}
	}
	if _, ok := e.names[name]; !ok {
		if len(e.names) >= e.maxNames {
			return flow.OtherIface, nameGlobal
		}
		e.names[name] = struct{}{}
	}
	if x == nil {
		return name, nameOK
	}
	if x.names == nil {
		x.names = map[string]struct{}{}
	}
	x.names[name] = struct{}{}
	return name, nameOK
}

// refused counts a record given flow.OtherIface.
func (e *exporters) refused(why nameRefusal) {
	switch why {
	case namePerExporter:
		e.otherPer.Add(1)
	case nameGlobal:
		e.otherGlobal.Add(1)
	}
}

// stats returns the losses by exporter (only those with gaps) and the
// records given flow.OtherIface.
func (e *exporters) stats() (map[netip.Addr]ExporterLoss, uint64, uint64) {
	e.mu.Lock()
	m := make(map[netip.Addr]ExporterLoss, len(e.by))
	for a, x := range e.by {
		if x.loss.Gaps > 0 {
			m[a] = x.loss
		}
	}
	e.mu.Unlock()
	return maps.Clone(m), e.otherPer.Load(), e.otherGlobal.Load()
}
