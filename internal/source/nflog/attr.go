package nflog

// Wire layout of nfnetlink_log messages, from the kernel's uapi header
// linux/netfilter/nfnetlink_log.h; the netlink and nfnetlink framing around
// them is internal/nfnetlink's. Values inside attributes are big-endian.

// The nfnetlink subsystem of NFLOG: the high byte of nlmsg_type.
const nfnlSubsysULOG = 4 // NFNL_SUBSYS_ULOG

// enum nfulnl_msg_types.
const (
	nfulnlMsgPacket = 0
	nfulnlMsgConfig = 1
)

// enum nfulnl_attr_type: attributes of an NFULNL_MSG_PACKET.
const (
	nfulaPacketHdr      = 1  // struct nfulnl_msg_packet_hdr: be16 hw_protocol, u8 hook, u8 pad
	nfulaMark           = 2  // be32
	nfulaTimestamp      = 3  // be64 sec, be64 usec
	nfulaIfindexIndev   = 4  // be32
	nfulaIfindexOutdev  = 5  // be32
	nfulaIfindexPhysin  = 6  // be32 (bridge port)
	nfulaIfindexPhysout = 7  // be32 (bridge port)
	nfulaHwaddr         = 8  // struct nfulnl_msg_packet_hw
	nfulaPayload        = 9  // the packet from its network header, cut to the copy range
	nfulaPrefix         = 10 // NUL-terminated log prefix
	nfulaUID            = 11 // be32
	nfulaSeq            = 12 // be32, per-instance sequence (NFULNL_CFG_F_SEQ)
	nfulaSeqGlobal      = 13 // be32
	nfulaGID            = 14 // be32
	nfulaHwtype         = 15 // be16
	nfulaHwheader       = 16
	nfulaHwlen          = 17 // be16
	nfulaCT             = 18
	nfulaCTInfo         = 19
	nfulaVLAN           = 20
	nfulaL2hdr          = 21
)

// Packet header layout inside NFULA_PACKET_HDR.
const packetHdrLen = 4

// Timestamp layout inside NFULA_TIMESTAMP.
const timestampLen = 16

// enum nfulnl_attr_config and config commands.
const (
	nfulaCfgCmd     = 1 // struct nfulnl_msg_config_cmd: u8 command
	nfulaCfgMode    = 2 // struct nfulnl_msg_config_mode: be32 copy_range, u8 copy_mode, u8 pad (packed: 6 bytes)
	nfulaCfgNlbufsz = 3 // be32
	nfulaCfgTimeout = 4 // be32, 1/100 s
	nfulaCfgQthresh = 5 // be32
	nfulaCfgFlags   = 6 // be16

	nfulnlCfgCmdBind     = 1
	nfulnlCfgCmdUnbind   = 2
	nfulnlCfgCmdPFBind   = 3
	nfulnlCfgCmdPFUnbind = 4

	nfulnlCopyPacket = 2

	nfulnlCfgFSeq = 0x0001
)
