// Package afpacket is a live packet source reading a Linux AF_PACKET socket
// through a TPACKET_V3 memory-mapped receive ring: the kernel fills blocks
// of frames, user space walks them in place (zero copy) and hands each
// block back when it moves past it. Several sources can share the traffic
// of one interface through a PACKET_FANOUT group.
//
// Capture is weir's live capture over these rings on the selected
// interfaces, read by Workers goroutines that each own a flow table shard.
//
// With several workers every interface gets one PACKET_FANOUT group (hash
// mode) with one socket per worker, joined in worker order. The kernel's
// fanout hash is symmetric and computed from the packet alone, so both
// directions of a flow, and the copies of one packet seen on several
// interfaces, reach the same worker: tables need no lock, and the table's
// interface dedup (flow.Config.DedupIfaces) sees every copy. Evicted
// records of all workers go to one sink (normally a set of sink.Queue),
// the merged eviction stream.
//
// Interfaces are chosen by a netdev.Selector and tracked over rtnetlink:
// links that appear (or come up) and match are opened, links that vanish
// or go down are released, without a restart.
//
// On systems other than Linux, Open and New return ErrUnsupported.
package afpacket
