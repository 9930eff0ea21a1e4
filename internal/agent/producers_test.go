package agent

import (
	"github.com/weir-dev/weir/internal/meter"
	"github.com/weir-dev/weir/internal/source"
	"github.com/weir-dev/weir/internal/source/afpacket"
	"github.com/weir-dev/weir/internal/source/conntrack"
	"github.com/weir-dev/weir/internal/source/ebpf"
	"github.com/weir-dev/weir/internal/source/ipfixrecv"
	"github.com/weir-dev/weir/internal/source/nflog"
)

// Every record producer is a source.Producer; the live capture is a
// source.Router too.
var (
	_ source.Producer = (*meter.Replay)(nil)
	_ source.Producer = (*afpacket.Capture)(nil)
	_ source.Router   = (*afpacket.Capture)(nil)
	_ source.Producer = (*ebpf.Source)(nil)
	_ source.Producer = (*conntrack.Source)(nil)
	_ source.Producer = (*nflog.Source)(nil)
	_ source.Producer = (*ipfixrecv.Collector)(nil)
)
