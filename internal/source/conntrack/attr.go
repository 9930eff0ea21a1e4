package conntrack

// Wire layout of ctnetlink messages, from the kernel's uapi headers
// linux/netlink.h, linux/netfilter/nfnetlink.h and
// linux/netfilter/nfnetlink_conntrack.h. Every multi-byte value inside a
// ctnetlink attribute is big-endian (network order); the netlink and
// attribute headers are in host order.

// Netlink message header (struct nlmsghdr): 16 bytes.
const (
	nlmsgLenOff   = 0  // u32 length of the message, header included
	nlmsgTypeOff  = 4  // u16 type: subsystem<<8 | message
	nlmsgFlagsOff = 6  // u16 NLM_F_* flags
	nlmsgSeqOff   = 8  // u32 sequence number
	nlmsgPidOff   = 12 // u32 port id of the sender
	nlmsgHdrLen   = 16

	nlmsgAlign = 4 // messages and attributes start on 4-byte boundaries
)

// Netlink control message types and flags (linux/netlink.h).
const (
	nlmsgNoop    = 0x1
	nlmsgError   = 0x2
	nlmsgDone    = 0x3
	nlmsgOverrun = 0x4

	nlmErrorLen = 4 // struct nlmsgerr starts with an s32 negative errno

	nlmFRequest = 0x1
	nlmFMulti   = 0x2
	nlmFAck     = 0x4
	nlmFDump    = 0x300 // NLM_F_ROOT | NLM_F_MATCH
	nlmFExcl    = 0x200 // on a new-message: the entry did not exist before (event)
	nlmFCreate  = 0x400 // on a new-message: the entry was created (event)
)

// nfgenmsg follows the netlink header of every nfnetlink message: 4 bytes.
const (
	nfgenFamilyOff  = 0 // u8 address family (AF_INET, AF_INET6, AF_UNSPEC)
	nfgenVersionOff = 1 // u8 NFNETLINK_V0
	nfgenResIDOff   = 2 // be16 resource id (0 here)
	nfgenLen        = 4

	nfnlSubsysCtnetlink = 1 // NFNL_SUBSYS_CTNETLINK: the high byte of nlmsg_type
)

// Address families carried in nfgenmsg.
const (
	afUnspec = 0
	afInet   = 2
	afInet6  = 10
)

// Attribute header (struct nlattr): u16 length (header included), u16 type.
// The two high bits of the type are flags, not part of the type.
const (
	nlaLenOff      = 0
	nlaTypeOff     = 2
	nlaHdrLen      = 4
	nlaFNested     = 0x8000
	nlaFNetByteord = 0x4000
	nlaTypeMask    = 0x3fff
)

// enum ctattr_type: top-level attributes of a conntrack message.
const (
	ctaTupleOrig      = 1
	ctaTupleReply     = 2
	ctaStatus         = 3
	ctaProtoinfo      = 4
	ctaHelp           = 5
	ctaNatSrc         = 6
	ctaTimeout        = 7
	ctaMark           = 8
	ctaCountersOrig   = 9
	ctaCountersReply  = 10
	ctaUse            = 11
	ctaID             = 12
	ctaNatDst         = 13
	ctaTupleMaster    = 14
	ctaSeqAdjOrig     = 15
	ctaSeqAdjReply    = 16
	ctaSecmark        = 17
	ctaZone           = 18
	ctaSecctx         = 19
	ctaTimestamp      = 20
	ctaMarkMask       = 21
	ctaLabels         = 22
	ctaLabelsMask     = 23
	ctaSynproxy       = 24
	ctaFilter         = 25
	ctaStatusMask     = 26
	ctaTimestampEvent = 27
)

// enum ctattr_tuple: inside CTA_TUPLE_ORIG / CTA_TUPLE_REPLY.
const (
	ctaTupleIP    = 1
	ctaTupleProto = 2
	ctaTupleZone  = 3
)

// enum ctattr_ip: inside CTA_TUPLE_IP.
const (
	ctaIPv4Src = 1
	ctaIPv4Dst = 2
	ctaIPv6Src = 3
	ctaIPv6Dst = 4
)

// enum ctattr_l4proto: inside CTA_TUPLE_PROTO.
const (
	ctaProtoNum        = 1
	ctaProtoSrcPort    = 2
	ctaProtoDstPort    = 3
	ctaProtoICMPID     = 4
	ctaProtoICMPType   = 5
	ctaProtoICMPCode   = 6
	ctaProtoICMPv6ID   = 7
	ctaProtoICMPv6Type = 8
	ctaProtoICMPv6Code = 9
)

// enum ctattr_protoinfo and ctattr_protoinfo_tcp.
const (
	ctaProtoinfoTCP = 1

	ctaProtoinfoTCPState       = 1
	ctaProtoinfoTCPWscaleOrig  = 2
	ctaProtoinfoTCPWscaleReply = 3
	ctaProtoinfoTCPFlagsOrig   = 4
	ctaProtoinfoTCPFlagsReply  = 5
)

// enum ctattr_counters: inside CTA_COUNTERS_ORIG / CTA_COUNTERS_REPLY.
const (
	ctaCountersPackets   = 1 // be64
	ctaCountersBytes     = 2 // be64
	ctaCounters32Packets = 3 // be32, old kernels
	ctaCounters32Bytes   = 4 // be32, old kernels
)

// enum ctattr_tstamp: inside CTA_TIMESTAMP.
const (
	ctaTimestampStart = 1 // be64 ns since the epoch
	ctaTimestampStop  = 2 // be64 ns since the epoch
)

// Message types within NFNL_SUBSYS_CTNETLINK (enum cntl_msg_types).
const (
	ipctnlMsgCtNew    = 0
	ipctnlMsgCtGet    = 1
	ipctnlMsgCtDelete = 2
)

// labelsLen is the size of the conntrack label bitmap (XT_CONNLABEL_MAXBIT+1 bits).
const labelsLen = 16
