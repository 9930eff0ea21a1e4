// Package pcapfilter compiles tcpdump filter expressions (pcap-filter(7) syntax)
// to classic BPF programs that live capture attaches to its AF_PACKET
// sockets with SO_ATTACH_FILTER, so the kernel drops unwanted frames before
// they reach the ring.
//
// The compiler is pure Go rather than libpcap through cgo: the weir binary
// stays static and cgo-free (it cross-compiles and needs no libpcap at run
// time), and the parser can be fuzzed. Correctness is established by a
// differential test against libpcap itself: the test compiles the same
// expressions with tcpdump (Debian's libpcap) and checks that both programs
// give every frame of a varied corpus the same verdict.
//
// Semantics follow libpcap 1.10 for Ethernet (LinkEthernet) and raw IP
// (LinkRaw) links, including its quirks: an IPv4 host or net also matches
// ARP and RARP packets; port tests skip IPv4 fragments other than the first;
// IPv6 protocol tests look through one fragment header but IPv6 port tests
// and icmp6[] do not walk extension headers; tcp[], udp[], icmp[] and the
// other transport-layer accessors apply to IPv4 only; '%' and '^' group as
// pcap's grammar makes them ("1 + 7 % 4 * 2" is 1 + (7 % (4*2))). The code
// is straight-line, without libpcap's optimizer, so programs are longer
// than libpcap's; they accept the same frames as libpcap's optimized
// programs (which, on truncated frames, can differ from its unoptimized
// ones when the optimizer drops a load whose result cannot matter).
//
// Differences from libpcap, all deliberate:
//
//   - vlan: AF_PACKET strips the 802.1Q tag before the filter runs and
//     exposes it through the ancillary loads SKF_AD_VLAN_TAG_PRESENT and
//     SKF_AD_VLAN_TAG. So "vlan" means "a tag was present", "vlan 100" means
//     "a tag was present and its VLAN ID is 100", and the primitives after
//     vlan keep the normal offsets (libpcap on a savefile shifts them by 4).
//     With QinQ only the outer tag is stripped. "len" does not count the
//     stripped tag.
//   - inbound/outbound use the ancillary packet type, as libpcap does on a
//     live Linux socket.
//   - host names are not resolved (no DNS at compile time) and port and
//     protocol names come from a small built-in table mirroring Debian's
//     /etc/services and /etc/protocols, not from the system files.
//   - "ip broadcast" knows no netmask and matches 0.0.0.0 and
//     255.255.255.255, as libpcap does without a netmask.
//   - offsets that would reach the kernel's negative (ancillary) load area,
//     IP protocols above 255 and Ethernet types above 65535 are errors.
//   - LLC/SNAP special cases of "ether proto" (IPX, AppleTalk, ISO,
//     NetBEUI) and the less common primitives (gateway, decnet, iso, atalk,
//     llc, wlan, mpls, pppoe, geneve, ...) are rejected with an error that
//     names them.
package pcapfilter

import (
	"errors"
	"fmt"
)

// LinkType selects the frame layout the program sees.
type LinkType int

// Link types.
const (
	// LinkEthernet: frames start with a 14-byte Ethernet header
	// (ARPHRD_ETHER, and the loopback device).
	LinkEthernet LinkType = iota
	// LinkRaw: frames start at the IP header (tun, WireGuard); IPv4 and
	// IPv6 are told apart by the version nibble.
	LinkRaw
)

// String names the link type.
func (l LinkType) String() string {
	switch l {
	case LinkEthernet:
		return "ethernet"
	case LinkRaw:
		return "raw"
	}
	return fmt.Sprintf("LinkType(%d)", int(l))
}

// Instruction is one classic BPF instruction, with the same layout as the
// kernel's struct sock_filter (unix.SockFilter).
type Instruction struct {
	Op     uint16
	Jt, Jf uint8
	K      uint32
}

// String renders the instruction as "op jt jf k" in decimal, the format of
// tcpdump -ddd.
func (i Instruction) String() string {
	return fmt.Sprintf("%d %d %d %d", i.Op, i.Jt, i.Jf, i.K)
}

// Limits of the compiler and of the kernel.
const (
	MaxInstructions = 4096       // BPF_MAXINSNS: longer programs fail with ErrTooLong
	MaxExprLen      = 64 << 10   // longest accepted expression, in bytes
	MaxDepth        = 100        // deepest nesting of parentheses and "not"
	DefaultSnaplen  = 262144     // accept value when Compile's snaplen is 0
	memWords        = 16         // BPF_MEMWORDS: scratch memory slots
	skfAdOff        = 0xfffff000 // SKF_AD_OFF (-0x1000): base of ancillary loads
)

// Ancillary load offsets from SKF_AD_OFF (linux/filter.h).
const (
	adProtocol        = 0
	adPktType         = 4
	adVLANTag         = 44
	adVLANTagPresent  = 48
	adMax             = 64 // SKF_AD_MAX
	packetOutgoing    = 4  // PACKET_OUTGOING (linux/if_packet.h)
	ancillaryPktType  = skfAdOff + adPktType
	ancillaryVLANTag  = skfAdOff + adVLANTag
	ancillaryVLANPres = skfAdOff + adVLANTagPresent
)

// Instruction classes, sizes, modes and operations (linux/bpf_common.h).
const (
	clsLD   = 0x00
	clsLDX  = 0x01
	clsST   = 0x02
	clsSTX  = 0x03
	clsALU  = 0x04
	clsJMP  = 0x05
	clsRET  = 0x06
	clsMISC = 0x07

	szW = 0x00
	szH = 0x08
	szB = 0x10

	modeIMM = 0x00
	modeABS = 0x20
	modeIND = 0x40
	modeMEM = 0x60
	modeLEN = 0x80
	modeMSH = 0xa0

	aluADD = 0x00
	aluSUB = 0x10
	aluMUL = 0x20
	aluDIV = 0x30
	aluOR  = 0x40
	aluAND = 0x50
	aluLSH = 0x60
	aluRSH = 0x70
	aluNEG = 0x80
	aluMOD = 0x90
	aluXOR = 0xa0

	jmpJA   = 0x00
	jmpJEQ  = 0x10
	jmpJGT  = 0x20
	jmpJGE  = 0x30
	jmpJSET = 0x40

	srcK = 0x00
	srcX = 0x08

	retK = 0x00
	retA = 0x10

	miscTAX = 0x00
	miscTXA = 0x80
)

// ErrTooLong is returned when the program would exceed MaxInstructions.
var ErrTooLong = errors.New("filter: program longer than 4096 instructions (BPF_MAXINSNS)")

// SyntaxError reports a problem with the expression, pointing at the token
// that caused it.
type SyntaxError struct {
	Pos   int    // byte offset of the token in the expression
	Token string // the offending token; empty at the end of the input
	Msg   string // what is wrong, possibly with a suggestion
}

// Error formats the error as `filter: at 9 ("prot"): msg`.
func (e *SyntaxError) Error() string {
	if e.Token == "" {
		return fmt.Sprintf("filter: at %d (end of input): %s", e.Pos, e.Msg)
	}
	return fmt.Sprintf("filter: at %d (%q): %s", e.Pos, e.Token, e.Msg)
}

// Compile compiles a pcap-filter(7) expression for the given link type to a
// classic BPF program. Accepted frames return snaplen (DefaultSnaplen when
// snaplen is 0), rejected ones 0. An empty or blank expression accepts
// everything. Errors are *SyntaxError (the expression is wrong or uses
// something unsupported) or ErrTooLong; an unknown link type is a plain
// error. The program passes Validate.
func Compile(expr string, link LinkType, snaplen uint32) ([]Instruction, error) {
	if snaplen == 0 {
		snaplen = DefaultSnaplen
	}
	if link != LinkEthernet && link != LinkRaw {
		return nil, fmt.Errorf("filter: unsupported link type %v", link)
	}
	if len(expr) > MaxExprLen {
		return nil, &SyntaxError{Pos: MaxExprLen, Msg: fmt.Sprintf("expression longer than %d bytes", MaxExprLen)}
	}
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	if len(toks) == 1 { // only the end-of-input token
		return []Instruction{{Op: clsRET | retK, K: snaplen}}, nil
	}
	p := &parser{toks: toks, link: link}
	root, err := p.parse()
	if err != nil {
		return nil, err
	}
	prog, err := assemble(root, snaplen)
	if err != nil {
		return nil, err
	}
	if err := Validate(prog); err != nil {
		// Cannot happen for a correct compiler; reported, never attached.
		return nil, fmt.Errorf("filter: internal error, generated program is invalid: %w", err)
	}
	return prog, nil
}
