//go:build linux

package afpacket

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/packet"
)

// Source reads one interface through a TPACKET_V3 ring. Next and
// NextTimeout must be called from one goroutine at a time; Stats and Close
// may be called from any goroutine, also while Next is waiting.
type Source struct {
	// Ring walk state, owned by the goroutine calling Next.
	ring      []byte // the mmap'ed ring: NumBlocks blocks of BlockSize bytes
	blockSize int
	numBlocks int
	cur       int  // index of the block being walked, or the next one to wait for
	held      bool // block cur is ours (TP_STATUS_USER) and not yet handed back
	left      int  // frames of block cur not yet returned
	off       int  // offset in block cur of the next frame header
	skipOut   bool // drop PACKET_OUTGOING copies (loopback without PACKET_IGNORE_OUTGOING)

	link    packet.LinkType
	iface   string // interned once: Frame.Iface costs nothing per frame
	fd      int    // AF_PACKET socket
	evfd    int    // eventfd Close writes to wake a waiting Next
	pfds    [2]unix.PollFd
	closed  atomic.Bool
	mu      sync.RWMutex // read-held by Next and Stats while they use fd/ring; Close write-locks before unmapping
	corrupt atomic.Uint64

	statsMu sync.Mutex
	stats   RingStats // accumulated kernel counters

	fanoutGroup uint16 // the fanout group joined (picked by the kernel for FanoutFlagUniqueID)
	fanoutOK    bool
}

// FanoutGroup returns the id of the fanout group the socket joined, and
// whether it joined one.
func (s *Source) FanoutGroup() (uint16, bool) { return s.fanoutGroup, s.fanoutOK }

const (
	ethPAll    = 0x0003 // ETH_P_ALL
	pollPeriod = 100    // ms: longest single poll(); Close also wakes it through the eventfd
)

// htons converts a 16-bit value to network byte order for sll_protocol.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Open creates the socket and its ring and binds it to cfg.Iface, looked up
// in the calling thread's network namespace (the socket stays in that
// namespace). It needs root or CAP_NET_RAW.
func Open(cfg RingConfig) (*Source, error) {
	c, err := cfg.normalize(unix.Getpagesize())
	if err != nil {
		return nil, err
	}
	ifi, err := net.InterfaceByName(c.Iface)
	if err != nil {
		return nil, fmt.Errorf("afpacket: interface %q: %w", c.Iface, err)
	}
	// Protocol 0: the socket receives nothing until bind names the
	// interface, so no other interface's frames land in the ring first.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("afpacket: socket(AF_PACKET): %w (needs root or CAP_NET_RAW)", err)
		}
		return nil, fmt.Errorf("afpacket: socket(AF_PACKET): %w", err)
	}
	s := &Source{fd: fd, evfd: -1, iface: strings.Clone(c.Iface), blockSize: c.BlockSize, numBlocks: c.NumBlocks}
	if err := s.setup(c, ifi); err != nil {
		_ = s.release() // the setup error is the one to report
		return nil, err
	}
	return s, nil
}

// setup configures the ring, maps it and binds the socket.
func (s *Source) setup(c RingConfig, ifi *net.Interface) error {
	if err := unix.SetsockoptInt(s.fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return fmt.Errorf("afpacket: PACKET_VERSION TPACKET_V3: %w", err)
	}
	if ifi.Flags&net.FlagLoopback != 0 {
		// Loopback shows every packet twice (sent and received): keep only
		// the received copy, as libpcap does. Older kernels lack the option.
		if unix.SetsockoptInt(s.fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1) != nil {
			s.skipOut = true
		}
	}
	req := unix.TpacketReq3{
		Block_size:     uint32(c.BlockSize),
		Block_nr:       uint32(c.NumBlocks),
		Frame_size:     uint32(c.FrameSize),
		Frame_nr:       uint32(c.BlockSize / c.FrameSize * c.NumBlocks),
		Retire_blk_tov: uint32(c.Timeout.Milliseconds()),
	}
	if err := unix.SetsockoptTpacketReq3(s.fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return fmt.Errorf("afpacket: PACKET_RX_RING (%d blocks of %d bytes): %w", c.NumBlocks, c.BlockSize, err)
	}
	ring, err := unix.Mmap(s.fd, 0, c.BlockSize*c.NumBlocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("afpacket: mmap ring: %w", err)
	}
	s.ring = ring
	if len(c.Filter) > 0 {
		if err := s.attachFilter(c.Filter); err != nil {
			return err
		}
	}
	sa := unix.SockaddrLinklayer{Protocol: htons(ethPAll), Ifindex: ifi.Index}
	if err := unix.Bind(s.fd, &sa); err != nil {
		return fmt.Errorf("afpacket: bind to %q (index %d): %w", c.Iface, ifi.Index, err)
	}
	if err := s.setLink(); err != nil {
		return err
	}
	if f := c.Fanout; f != nil {
		arg := int(f.Group) | f.Mode<<16
		if err := unix.SetsockoptInt(s.fd, unix.SOL_PACKET, unix.PACKET_FANOUT, arg); err != nil {
			return fmt.Errorf("afpacket: PACKET_FANOUT group %d mode %#x: %w", f.Group, f.Mode, err)
		}
		// The kernel reports id | type<<16 | flags<<8: the group id the
		// other members must join (the one it picked, for UniqueID).
		v, err := unix.GetsockoptInt(s.fd, unix.SOL_PACKET, unix.PACKET_FANOUT)
		if err != nil {
			return fmt.Errorf("afpacket: read back PACKET_FANOUT: %w", err)
		}
		s.fanoutGroup, s.fanoutOK = uint16(v), true
	}
	if s.evfd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return fmt.Errorf("afpacket: eventfd: %w", err)
	}
	s.pfds = [2]unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN | unix.POLLERR}, {Fd: int32(s.evfd), Events: unix.POLLIN}}
	return nil
}

// attachFilter attaches prog with SO_ATTACH_FILTER; the kernel checks it.
func (s *Source) attachFilter(prog []Instruction) error {
	insns := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		insns[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	fp := unix.SockFprog{Len: uint16(len(insns)), Filter: &insns[0]}
	if err := unix.SetsockoptSockFprog(s.fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fp); err != nil {
		return fmt.Errorf("afpacket: attach filter of %d instructions: %w", len(insns), err)
	}
	return nil
}

// setLink derives the frames' link type from the bound device's ARPHRD type.
func (s *Source) setLink() error {
	sa, err := unix.Getsockname(s.fd)
	if err != nil {
		return fmt.Errorf("afpacket: getsockname: %w", err)
	}
	ll, ok := sa.(*unix.SockaddrLinklayer)
	if !ok {
		return fmt.Errorf("afpacket: getsockname returned %T", sa)
	}
	switch ll.Hatype {
	case unix.ARPHRD_ETHER, unix.ARPHRD_LOOPBACK: // loopback frames carry a (zero) Ethernet header too
		s.link = packet.LinkEthernet
	case unix.ARPHRD_NONE, unix.ARPHRD_RAWIP: // tun, wireguard: frames start at the IP header
		s.link = packet.LinkRaw
	default:
		return fmt.Errorf("afpacket: interface %q has unsupported ARPHRD type %d", s.iface, ll.Hatype)
	}
	return nil
}

// Link returns the link-layer type of the frames Next returns.
func (s *Source) Link() packet.LinkType { return s.link }

// Stats reads the kernel's counters (which resets them) and returns the
// totals since Open.
func (s *Source) Stats() (RingStats, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	if s.closed.Load() {
		st := s.stats
		st.Corrupt = s.corrupt.Load()
		return st, nil
	}
	if err := s.readStats(); err != nil {
		return RingStats{}, err
	}
	st := s.stats
	st.Corrupt = s.corrupt.Load()
	return st, nil
}

// readStats adds the kernel's counters to s.stats; statsMu must be held.
func (s *Source) readStats() error {
	k, err := unix.GetsockoptTpacketStatsV3(s.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return fmt.Errorf("afpacket: PACKET_STATISTICS: %w", err)
	}
	s.stats.Packets += uint64(k.Packets)
	s.stats.Drops += uint64(k.Drops)
	s.stats.FreezeQueue += uint64(k.Freeze_q_cnt)
	return nil
}

// Close wakes a waiting Next (which then returns source.ErrStopped), waits
// for it to leave the ring, unmaps the ring and closes the socket. The
// counters are read one last time, so Stats still works after Close.
// Frame.Data of the last frame is invalid after Close. Close is idempotent.
func (s *Source) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	var one = [8]byte{1} // eventfd counter increment (native endian; any nonzero value wakes poll)
	_, _ = unix.Write(s.evfd, one[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statsMu.Lock()
	_ = s.readStats()
	s.statsMu.Unlock()
	return s.release()
}

// release unmaps the ring and closes the descriptors; mu is held or the
// Source is not shared yet.
func (s *Source) release() error {
	var err error
	if s.ring != nil {
		err = unix.Munmap(s.ring)
		s.ring = nil
	}
	if s.fd >= 0 {
		if e := unix.Close(s.fd); err == nil {
			err = e
		}
		s.fd = -1
	}
	if s.evfd >= 0 {
		_ = unix.Close(s.evfd)
		s.evfd = -1
	}
	s.held, s.left = false, 0
	if err != nil {
		return fmt.Errorf("afpacket: close: %w", err)
	}
	return nil
}
