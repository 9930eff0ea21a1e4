package conntrack

// Wire layout of ctnetlink messages, from the kernel's uapi header
// linux/netfilter/nfnetlink_conntrack.h; the netlink and nfnetlink framing
// around them is internal/nfnetlink's. Every multi-byte value inside a
// ctnetlink attribute is big-endian (network order).

// The nfnetlink subsystem of ctnetlink: the high byte of nlmsg_type.
const nfnlSubsysCtnetlink = 1 // NFNL_SUBSYS_CTNETLINK

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
