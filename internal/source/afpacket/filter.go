package afpacket

import (
	"sync"

	"github.com/weir-dev/weir/internal/netdev"
	"github.com/weir-dev/weir/internal/pcapfilter"
)

// CompileFilter checks a tcpdump-syntax filter expression and returns
// what Config.Filter wants: the program for a link, compiled once per
// link type (Ethernet, or raw IP for tun and wireguard devices).
func CompileFilter(expr string) (func(netdev.Link) ([]Instruction, error), error) {
	if _, err := pcapfilter.Compile(expr, pcapfilter.LinkEthernet, 0); err != nil {
		return nil, err
	}
	c := &filterCache{expr: expr, prog: map[pcapfilter.LinkType][]Instruction{}}
	return c.forLink, nil
}

// filterCache compiles the filter once per link type.
type filterCache struct {
	expr string
	mu   sync.Mutex
	prog map[pcapfilter.LinkType][]Instruction
}

func (f *filterCache) forLink(l netdev.Link) ([]Instruction, error) {
	lt := pcapfilter.LinkEthernet
	switch l.Type {
	case 65534, 519: // ARPHRD_NONE (tun, wireguard), ARPHRD_RAWIP: frames start at the IP header
		lt = pcapfilter.LinkRaw
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.prog[lt]; ok {
		return p, nil
	}
	insns, err := pcapfilter.Compile(f.expr, lt, 0)
	if err != nil {
		return nil, err
	}
	prog := make([]Instruction, len(insns))
	for i, in := range insns {
		prog[i] = Instruction{Op: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	f.prog[lt] = prog
	return prog, nil
}
