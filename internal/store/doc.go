// Package store is weir's embedded columnar flow store: it buffers
// flow.Records per partition, writes them as compressed, checksummed
// column blocks, lets readers skip blocks by their summaries and decode only
// the columns they need, and enforces retention.
//
// # Layout
//
//	DIR/LOCK                          flock(2)-held by the one writer
//	DIR/<iface>/<YYYY-MM-DD>/blocks   append-only block file
//	DIR/<iface>/<YYYY-MM-DD>/index    committed block list (temp+fsync+rename)
//
// <iface> is the interface name escaped for the file system: bytes outside
// [A-Za-z0-9_-] (and a leading '.') become %XX, so "../x" or "a/b" can never
// leave DIR; names escaping to more than 128 bytes are cut and suffixed with
// a hash. The real name is kept in the index. The day is the UTC day of each
// row's Start. Names starting with '.' are temporary (deleted partitions,
// index temps) and ignored by readers.
//
// # Rows and times
//
// A writeout rounds each row's Start down and End up to Config.TimePrecision
// (1 ms by default, as IPFIX and nfdump keep them; 1 ns is exact) and writes
// the block's rows sorted by Start, stably: readers get them in that order,
// not in the order they were written. Counts are always exact, and so are
// the drop counters, the sampling rate, the post-NAT key's addresses,
// ports and version, the verdict, mark and zone, and drop reasons and
// rules of up to 64 bytes (a longer one is cut at a rune start to at most
// 64 bytes, with a warning), and the workload and service strings of up
// to 4096 bytes (likewise). A workload or service whose strings are all
// "" reads back as nil (unknown).
//
// # FORMAT
//
// All integers are little-endian. A block is
//
//	 0  magic "WBK1"
//	 4  u32 block length (header + payload)
//	 8  u32 header length (including the trailing header CRC)
//	12  u8 version (5), u8 column count (41), u16 omitted columns'
//	      bits 32-47 (version 5; 0 before)
//	16  u32 rows
//	20  u32 omitted columns' bits 0-31: bit i set = column i is all 0
//	      ("" for strings, :: for addresses) and has no directory entry
//	      and no bytes; only columns 18 and up (0 before version 4)
//	24  i64 min Start, i64 max End
//	40  column directory, 36 bytes per column not omitted, in column-id order:
//	      u8 encoding, u8 compression (0 raw, 1 zstd, 2 planes), u8 flags (1: End is
//	      stored as End-Start), u8 reserved, u32 offset (from block start),
//	      u32 stored length, u32 raw length, u32 CRC32C of the stored bytes,
//	      u64 min, u64 max (numeric columns; int64 bits for Start/End; for
//	      string columns the shortest and longest string's length)
//	    four bloom filters (src addr, dst addr, src port, dst port), each
//	      u8 hash count, 3 reserved bytes, u32 words, words×u64
//	    u32 CRC32C of the header bytes before it
//	payload: the columns' stored bytes, back to back, in any order (the
//	directory's offsets place them)
//
// Column ids, which are also the directory order: 0 SrcAddr, 1 DstAddr,
// 2 IPVersion, 3 SrcPort, 4 DstPort, 5 Proto, 6 ICMPType, 7 ICMPCode,
// 8 Packets, 9 Bytes, 10 RevPackets, 11 RevBytes, 12 TCPFlags,
// 13 RevTCPFlags, 14 EndReason, 15 VLAN, 16 Start, 17 End (these 18 since
// version 1), 18 DropPackets, 19 DropBytes, 20 DropReason, 21 Sampling
// (since version 3), 22 NATSrcAddr, 23 NATDstAddr, 24 NATVersion,
// 25 NATSrcPort, 26 NATDstPort, 27 Verdict, 28 Rule, 29 Mark, 30 Zone
// (since version 4: flow.Record's PostNAT addresses, ports and IP
// version, 0 for a row not translated, whose addresses are then :: and
// ports 0; Verdict, Rule, Mark and Zone), 31 SrcWorkloadName,
// 32 SrcWorkloadNamespace, 33 SrcWorkloadNode, 34 DstWorkloadName,
// 35 DstWorkloadNamespace, 36 DstWorkloadNode, 37 ServiceName,
// 38 ServiceBackends, 39 ServiceGroup, 40 ServiceMatch (since version 5:
// the strings of the records' SrcWorkload, DstWorkload and Service, ""
// for nil; a reader rebuilds one shared pointer per distinct workload or
// service of a block). Addresses are adict or araw, DropReason and Rule
// sdict, the workload and service strings sdictl, the others integer
// encodings. Columns 18 and up are nearly always all zero, and then
// omitted: they cost no byte.
//
// Version 4 blocks (column count 31, bitmap bits 0-30) are read with the
// version 5 columns nil and 0. Version 3 blocks (column count 22, nothing omitted, an unused column
// const 0 and an unused DropReason the sdict of the one entry "") are
// read as they are, with the version 4 columns 0, "" and ::; version 2
// blocks (column count 18) likewise, with DropPackets, DropBytes and
// Sampling 0 and DropReason "" too; so are version 1 blocks (the same,
// but without compression 2). A block of any other version, whose column
// count is not its version's, or whose omitted bitmap names a column below
// 18 or past the last, is corrupt (skipped), never misread.
//
// A column's raw stream (after decompression; compression is used only when
// it saves at least 1/32 of the stream, so incompressible data is stored
// raw) is one of the encodings below. Compression 1 is one zstd frame.
// Compression 2 codes each part of the stream on its own: the encoding's
// fixed fields (with the v4 bitmap, or with sdict's entries) and every byte
// plane, each cut into chunks of at most 65536 bytes, stored in order as
//
//	u8 mode, uvarint raw length, then by mode:
//	  0 raw:  the bytes
//	  1 rle:  u8 the one byte repeated
//	  2 huff0 1X, 3 huff0 4X, 4 FSE: uvarint stored length, the
//	    klauspost/compress huff0 (table + bitstream) or fse (normalised
//	    counts + bitstream) block
//
// Planes differ (a low byte is near-uniform, a high byte mostly zero), so one
// code per plane beats zstd's one literal code per stream.
//
//	const (1)   u64 value
//	for (2)     u8 width, u64 scale, u64 base, width byte planes: v = base + u*scale
//	delta (3)   as for, but u is the zigzag delta of consecutive (v-base)/scale
//	dict (4)    u8 index width, u32 size, u8 value width, u64 base,
//	            value planes (size), index planes (rows); dictionary in
//	            descending frequency so indexes are small and skewed
//	adict (5)   u32 size, u8 index width, v4 bitmap (size bits), entries
//	            (4 bytes if IPv4-mapped else 16), index planes (rows)
//	araw (6)    v4 bitmap (rows bits), entries
//	sdict (7)   u32 size (1..rows; 0 for no rows), u8 index width,
//	            size entries in descending frequency, each u8 length
//	            (at most 64) and that many bytes, then index planes (rows);
//	            width 0 only with one entry
//	sdictl (8)  as sdict, but each entry's length is a uvarint (at most
//	            4096)
//
// Byte planes store byte j of every value together (plane 0 first), which
// keeps the high, mostly-zero bytes apart from the low ones so zstd's entropy
// coder sees skewed distributions. Scale is 1, 1e3, 1e6 or 1e9 (the largest
// that divides every v-base: times from µs-resolution captures shrink by
// 10 bits).
//
// The index file is
//
//	"WIX1", u32 version (1), u64 epoch (random per partition), u64 generation,
//	u64 committed data length, u16 iface name length, name, u32 entries,
//	entries × {u64 offset, u32 block length, u32 header length, u32 rows,
//	u32 reserved, i64 min Start, i64 max End}, u32 CRC32C of all before it.
//
// # Safety
//
// A writeout appends blocks to the data file, fsyncs it, then writes the new
// index to a temp file, fsyncs it, renames it over the index and fsyncs the
// directory. Readers use only blocks listed in the index they loaded, so they
// never see a block in flight; the writer truncates uncommitted tails when it
// reopens a partition. A block whose header or column CRC fails, or that is
// truncated, is skipped and counted (Stats.CorruptBlocks); an index that fails
// its CRC is rebuilt by scanning the data file for intact blocks.
package store
