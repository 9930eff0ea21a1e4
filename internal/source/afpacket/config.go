package afpacket

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"
)

// Defaults and limits of RingConfig.
const (
	// 16 blocks of 1 MiB: every block handed over costs a wake-up of the
	// reader, and at 150k packets/s 1 MiB blocks took 0.72x the CPU per
	// packet of 256 KiB ones (2 MiB: no better). Setting up 16 MiB of
	// 1 MiB blocks costs ~0.02 s of CPU (64 MiB of them once cost 0.22 s
	// of memory compaction).
	DefaultBlockSize = 1 << 20
	DefaultNumBlocks = 16                    // 16 MiB ring per socket
	DefaultFrameSize = 2048                  // tp_frame_size hint
	DefaultTimeout   = 50 * time.Millisecond // block retire timeout

	MaxBlockSize = 1 << 30 // largest block the kernel's page allocator can be asked for is far smaller; this only bounds arithmetic
	MaxNumBlocks = 1 << 16
	MaxRingSize  = 1 << 32 // 4 GiB: bound on BlockSize*NumBlocks
	MinFrameSize = 80      // TPACKET3_HDRLEN (48 + sizeof(sockaddr_ll) = 68) rounded up to TPACKET_ALIGNMENT (16)
	MaxTimeout   = time.Hour
)

// Fanout modes (PACKET_FANOUT_*): how the kernel spreads the packets of an
// interface over the sockets of one fanout group.
const (
	FanoutHash     = 0 // by flow hash: both directions of a flow go to one socket
	FanoutLB       = 1 // round robin
	FanoutCPU      = 2 // by the CPU that received the packet
	FanoutRollover = 3 // fill one socket, then the next
	FanoutRandom   = 4 // random
	FanoutQM       = 5 // by the skb's recorded receive queue
)

// Fanout mode flags, OR-ed into Fanout.Mode.
const (
	FanoutFlagRollover       = 0x1000 // spill to another socket when the chosen one is full
	FanoutFlagUniqueID       = 0x2000 // with Group 0: the kernel picks an unused group id (read it with Source.FanoutGroup); later members join by that id without this flag
	FanoutFlagIgnoreOutgoing = 0x4000 // do not fan out outgoing packets
	FanoutFlagDefrag         = 0x8000 // reassemble IP fragments before hashing
)

const fanoutFlags = FanoutFlagRollover | FanoutFlagUniqueID | FanoutFlagIgnoreOutgoing | FanoutFlagDefrag

// ErrUnsupported is returned by Open on systems without AF_PACKET.
var ErrUnsupported = errors.New("afpacket: live capture (-i, AF_PACKET) needs Linux; this is " + runtime.GOOS + " (weir capture --read works everywhere)")

// RingConfig describes one AF_PACKET ring. Zero values get the defaults.
type RingConfig struct {
	Iface     string        // interface name (in the current network namespace); required
	BlockSize int           // ring block size in bytes (default 1 MiB; a power of two, at least the page size)
	NumBlocks int           // number of ring blocks (default 16; at least 2)
	FrameSize int           // tp_frame_size hint (default 2048; multiple of 16, at least MinFrameSize, at most BlockSize)
	Timeout   time.Duration // block retire timeout (default 50ms, millisecond granularity): how long a partly filled block waits before user space sees it
	Fanout    *Fanout       // optional PACKET_FANOUT group
	// Filter is a classic BPF program attached before the socket is bound,
	// so the kernel drops unwanted frames before they reach the ring and
	// no unfiltered frame is ever seen. Empty: every frame.
	Filter []Instruction
}

// Instruction is one classic BPF instruction, laid out as the kernel's
// struct sock_filter.
type Instruction struct {
	Op     uint16
	Jt, Jf uint8
	K      uint32
}

// MaxFilterLen is the kernel's limit on a classic BPF program (BPF_MAXINSNS).
const MaxFilterLen = 4096

// Fanout joins the socket to a PACKET_FANOUT group. All sockets of one
// group (same Group id in one network namespace) must use the same Mode.
type Fanout struct {
	Group uint16 // group id
	Mode  int    // FanoutHash (default) … FanoutQM, optionally OR-ed with FanoutFlag*
}

// RingStats are the kernel's counters for the socket (PACKET_STATISTICS),
// accumulated since Open (the kernel resets its copy on every read), plus
// the source's own.
type RingStats struct {
	Packets     uint64 // packets the socket accepted (tp_packets; includes Drops)
	Drops       uint64 // packets dropped because the ring was full (tp_drops)
	FreezeQueue uint64 // times the ring was frozen because no block was free (tp_freeze_q_cnt)
	Corrupt     uint64 // ring blocks abandoned because a frame header pointed outside the block (should stay 0)
}

// normalize returns cfg with the defaults filled in, or an error naming
// the first invalid field. pageSize is the system page size.
func (cfg RingConfig) normalize(pageSize int) (RingConfig, error) {
	c := cfg
	if c.Iface == "" {
		return c, errors.New("afpacket: RingConfig.Iface is empty")
	}
	if len(c.Iface) > 15 { // IFNAMSIZ-1
		return c, fmt.Errorf("afpacket: interface name %q longer than 15 bytes", c.Iface)
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.NumBlocks == 0 {
		c.NumBlocks = DefaultNumBlocks
	}
	if c.FrameSize == 0 {
		c.FrameSize = DefaultFrameSize
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if pageSize <= 0 {
		pageSize = 4096
	}
	switch {
	case c.BlockSize < pageSize || c.BlockSize > MaxBlockSize || c.BlockSize&(c.BlockSize-1) != 0:
		return c, fmt.Errorf("afpacket: BlockSize %d must be a power of two between the page size %d and %d", c.BlockSize, pageSize, MaxBlockSize)
	case c.NumBlocks < 2 || c.NumBlocks > MaxNumBlocks:
		return c, fmt.Errorf("afpacket: NumBlocks %d out of range 2..%d", c.NumBlocks, MaxNumBlocks)
	case int64(c.BlockSize)*int64(c.NumBlocks) > MaxRingSize:
		return c, fmt.Errorf("afpacket: ring of %d blocks of %d bytes exceeds %d bytes", c.NumBlocks, c.BlockSize, int64(MaxRingSize))
	case c.FrameSize < MinFrameSize || c.FrameSize%16 != 0 || c.FrameSize > c.BlockSize:
		return c, fmt.Errorf("afpacket: FrameSize %d must be a multiple of 16 between %d and BlockSize %d", c.FrameSize, MinFrameSize, c.BlockSize)
	case c.Timeout < time.Millisecond || c.Timeout > MaxTimeout:
		return c, fmt.Errorf("afpacket: Timeout %v out of range 1ms..%v", c.Timeout, MaxTimeout)
	}
	if len(c.Filter) > MaxFilterLen {
		return c, fmt.Errorf("afpacket: Filter has %d instructions, more than the kernel's %d", len(c.Filter), MaxFilterLen)
	}
	if c.Fanout != nil {
		if m := c.Fanout.Mode; m < 0 || m&^fanoutFlags > FanoutQM {
			return c, fmt.Errorf("afpacket: Fanout.Mode %#x: want FanoutHash..FanoutQM, optionally with FanoutFlag* bits", m)
		}
		if c.Fanout.Mode&FanoutFlagUniqueID != 0 && c.Fanout.Group != 0 {
			return c, fmt.Errorf("afpacket: FanoutFlagUniqueID needs Fanout.Group 0 (the kernel picks it), got %d", c.Fanout.Group)
		}
		f := *c.Fanout // private copy: the caller may reuse its Fanout
		c.Fanout = &f
	}
	return c, nil
}

// Validate returns cfg with the defaults filled in, or an error naming the
// first invalid field, without opening anything.
func (cfg RingConfig) Validate() (RingConfig, error) { return cfg.normalize(os.Getpagesize()) }
