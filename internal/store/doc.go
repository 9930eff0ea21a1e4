// Package store is weir's embedded columnar flow store: it buffers
// flow.Records per partition, writes them as compressed, checksummed
// column blocks, lets readers skip blocks by their summaries and decode only
// the columns they need, and enforces retention.
//
// # Layout
//
//	DIR/LOCK                          flock(2)-held by the one writer
//	DIR/<iface>/<YYYY-MM-DD>/blocks   append-only block file
//	DIR/<iface>/<YYYY-MM-DD>/index    committed block list (a journal: records appended, fsynced; rewritten whole by temp+fsync+rename)
//
// <iface> is the interface name escaped for the file system: bytes outside
// [A-Za-z0-9_-] (and a leading '.') become %XX, so "../x" or "a/b" can never
// leave DIR; names escaping to more than 128 bytes are cut and suffixed with
// a hash. The real name is kept in the index. The day is the UTC day of each
// row's Start. Names starting with '.' are temporary (deleted partitions
// ".del-*", partitions being rewritten ".cmp-<day>", index temps) and
// ignored by readers.
//
// Directories are created 0700 and files 0600 (Config.Mode ModeGroup:
// 0750 and 0640; the umask applies on top); Open warns when DIR lets
// others in. Below DIR nothing is opened by path: every directory and
// file is opened relative to its parent's descriptor with O_NOFOLLOW
// (openat, mkdirat, renameat, unlinkat), so a symbolic link where a store
// file or directory goes is an error naming it (ErrSymlink: writes to that
// partition fail and are counted, readers skip it, check reports it) and
// its target is never opened, truncated or written. An index temp is
// unlinked and created O_EXCL; a block file with a second hard link is
// refused. DIR itself is the operator's path and may be a link.
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
// 64 bytes, with a warning), and the workload and service strings and
// the node of up to 4096 bytes (likewise). A workload or service whose
// strings are all "" reads back as nil (unknown).
//
// # Writeouts and their bounds
//
// Rows are buffered per partition and become one block per partition at
// each writeout (Config.Writeout, and at Flush and Close); a partition is
// also written out on its own at MaxBlockRows rows, or once it holds
// 16,384 rows whose Start times span Writeout (a day replayed from a file
// still gets time-ordered blocks, while Start times an exporter sets at
// random cannot cut blocks of a few rows). At Config.MaxPendingRows rows
// buffered in all, the largest partitions are written out first. The
// writer holds at most Config.MaxPartitions partitions (the least
// recently written is written out and released) and keeps the files of
// at most 128 open.
//
// A writeout that fails (disk full, quota, read-only, I/O error, a link)
// leaves its rows buffered and is retried after a backoff (0.5 s doubling
// to 5 s); a failure of the disk holds every partition, any other only
// its own. Each cause is said once through Config.Log and counted by
// reason (Stats.WriteErrors, weir_store_write_errors_total), and its end
// is said with what was dropped meanwhile. While writes fail, rows past
// MaxBlockRows in a partition or MaxPendingRows in all are dropped and
// counted (Stats.DroppedRows): every row given to Write is written,
// buffered, or counted as dropped. Flush and Close return within
// Config.CloseTimeout (4 s) in every state, a write stuck in the kernel
// included; what Close could not write by then is counted as dropped.
//
// # Retention
//
// The unit of retention is the block. Config.Retention deletes the blocks
// whose rows all ended before now minus Retention; Config.MaxSize then
// deletes the oldest blocks (by their last End) until the disk space of
// the store's files is at most MaxSize, so a store of one day keeps as
// much of it as the bound allows (to within one block). A partition
// keeps its other blocks: its index is rewritten without the pruned ones
// (a new epoch, so readers reload it), then their bytes are freed by
// punching holes (FALLOC_FL_PUNCH_HOLE, Linux; the offsets of the others
// stay valid) or, where that is not supported, by writing the kept blocks
// into ".cmp-<day>", fsyncing it, and swapping it in by two renames (Open
// finishes a swap a crash interrupted). A partition left without blocks
// is renamed to a dot-name and deleted. A reader that meets a block pruned
// since it listed it gets ErrPruned, not damage.
//
// # FORMAT
//
// All integers are little-endian. A block is
//
//	 0  magic "WBK1"
//	 4  u32 block length (header + payload)
//	 8  u32 header length (including the trailing header CRC)
//	12  u8 version (11), u8 column count (42), u16 omitted columns'
//	      bits 32-47 (versions 5 to 9; 0 before)
//	16  u32 rows
//	20  u32 omitted columns' bits 0-31: bit i set = column i is all 0
//	      ("" for strings, :: for addresses) and has no directory entry
//	      and no bytes; only columns 18 and up (0 before version 4)
//	24  i64 min Start, i64 max End
//	40  column directory (version 11: varint entries, below), 36 bytes per
//	      column not omitted, in column-id order:
//	      u8 encoding, u8 compression (0 raw, 1 zstd, 2 planes), u8 flags (1: End is
//	      stored as End-Start; 2, version 8, Bytes and RevBytes only: each
//	      value is r<<16 | q with the row's bytes = q×packets + r, r under
//	      packets, packets from Packets or RevPackets; 4, version 9,
//	      RevPackets only: each value is zigzag(e)<<8 | t with the row's
//	      reverse packets = floor(t×Packets/2) + e; 8, version 9, Proto,
//	      ICMPType, ICMPCode, TCPFlags and RevTCPFlags only, with encoding
//	      tuple and no bytes: the values are DstPort's tuples'; 16,
//	      version 10, with 2 only: the stream holds values only for the
//	      rows whose packets are not 0, in row order, the others' bytes
//	      being 0), u8
//	      reserved, u32 offset (from block start),
//	      u32 stored length, u32 raw length, u32 CRC32C of the stored bytes,
//	      u64 min, u64 max (numeric columns; int64 bits for Start/End; for
//	      string columns the shortest and longest string's length)
//	    four filters (src addr, dst addr, src port, dst port), each
//	      u8 hash count, 3 reserved bytes, u32 words, words×u64: a bloom
//	      filter (hash count 1-16), a port bucket bitmap (0, 16 words:
//	      bit p>>6 set for each port p), (version 12, the port filters;
//	      hash count 254) the bitmap's runs of set buckets, 1 to 15
//	      words, two runs a word (u32 at bit 0, then at bit 32: u16
//	      first bucket, u16 last), ascending with a clear bucket between
//	      runs, the last word's top half 0xffffffff when the runs are
//	      odd (written when the runs take fewer words than the bitmap),
//	      or (version 9, the address
//	      filters; hash count 255) an address set:
//	        word 0: u32 n4, u32 lo; word 1: u8 L, u8 k6, u16 0, u32 m6;
//	        word 2: u32 hi, u32 0; then the n4 distinct IPv4 addresses
//	        (big-endian uint32, lo the least, hi the greatest) exactly:
//	        L = 255: a bitmap of hi-lo+1 bits (bit v-lo set); L < 32:
//	        Elias-Fano, ceil(n4×L/64) words of the values' low L bits
//	        (value i's at bit i×L), then n4 + ((hi-lo)>>L) + 1 bits with
//	        bit ((v-lo)>>L) + i set for value i; then m6 words, a bloom
//	        filter with k6 hashes of the other addresses (none: 0, 0)
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
// service of a block), 41 Node (since version 6: where the record was
// observed, flow.Record.Node). Addresses are adict, adictd (since
// version 7), adicts (since version 9; SrcAddr and DstAddr) or araw;
// DstPort is a tuple (since version 9) or an integer encoding; DropReason
// and Rule sdict, the workload and service strings and Node sdictl, the
// others integer encodings. Columns 18 and up are nearly always all zero,
// and then omitted: they cost no byte. Node is "" (omitted) or one name
// in nearly every block: a one-entry sdictl without index planes, its
// directory entry and a few bytes a block.
//
// Version 12 has version 11's layout and adds port runs (hash count 254)
// in the port filters; and its writer classes address-set entries by the
// index byte they land in (see adicts), which any version 9 and up
// reader takes. Version 11 blocks are read as they are.
// Version 11 writes each directory entry with varints: u8 encoding, u8
// compression, u8 flags, uvarint offset from the header's end, uvarint
// stored length, uvarint raw length (compressions 1 and 2 only; else the
// stored length), u32 CRC32C (only when the stored length is not 0),
// uvarint zigzag(min - base), uvarint zigzag(max - min) (wrapping; base
// the header's min Start for Start and End, else 0): ~16 bytes an entry
// where version 10 took 36; and it adds the dicte encoding. Version 10
// blocks are read as they are.
// Version 10 has version 9's layout and adds flag 16 (per-packet byte
// counts without the rows that have no packets); version 9 blocks are
// read as they are. Version 9 has version 8's layout and adds flags 4 (RevPackets as a
// ratio of Packets) and 8 (columns of the service tuple), the encodings
// tuple, adicts and deltau, and address sets in the address filters;
// version 8 blocks are read as they are. Version 8 has version 7's
// layout and adds flag 2 (per-packet byte
// counts); version 7 blocks are read as they are. Version 7 has version
// 6's layout and adds the adictd encoding; version
// 6 blocks are read as they are. Version 5 blocks (column count 41) are read with Node "". Version 4 blocks (column count 31, bitmap bits 0-30) are read with the
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
//	adictd (9)  as adict, with entries of equal count in ascending address
//	            order (IPv4 first), and the IPv4 entries' 4 byte planes
//	            holding, for each, the zigzag of its big-endian value minus
//	            the previous IPv4 entry's (mod 2^32; the first's minus 0):
//	            a block's many once-seen addresses cost a small delta each.
//	            Chosen over adict when it lowers the planes' entropy
//	tuple (10)  DstPort only: u32 size (1..rows), u8 index width, the
//	            distinct (DstPort, Proto, ICMPType, ICMPCode, TCPFlags,
//	            RevTCPFlags) in descending frequency as 7 byte planes
//	            (DstPort's two first), index planes (rows). Used when a
//	            block has at most min(256, rows/7) of them
//	deltau (11) as delta, but u is the plain difference (every one ≥ 0:
//	            a non-decreasing column, Start)
//	adicts (12) SrcAddr and DstAddr, when the block's filter for the
//	            column is an address set (chosen when the set takes at
//	            most 12 bits an IPv4 entry): u32 size, u8 index width, u32
//	            n6, size count classes (u8: the set's n4 = size-n6
//	            addresses in ascending order, then the others), the others
//	            as 16 byte planes (n6 each), index planes (rows). The
//	            dictionary is the entries by class descending, within a
//	            class in stored order. Any class bytes read; the writer
//	            puts 2 for the 256 most used entries (rows capped at 255,
//	            ties in stored order), 1 for the next 65,280, 0 for the
//	            rest (until 2026-11-27: the entry's rows up to 255)
//	dicte (13)  version 11, integer columns: as dict, but the values seen
//	            once are escapes: u8 index width, u32 size (entries seen
//	            more than once), u8 value width, u64 base, u32 escapes, u8
//	            escape width, u8 order, value planes (size), index planes
//	            (rows; index size is an escape), escape planes (escapes:
//	            value-base, in row order). Order 0: the entries by
//	            descending frequency, value-base; order 1 (written when
//	            size ≤ 255): ascending, the first value-base and each next
//	            one value - previous - 1. Chosen for a dictionary with at
//	            least 16 values seen once
//
// Byte planes store byte j of every value together (plane 0 first), which
// keeps the high, mostly-zero bytes apart from the low ones so zstd's entropy
// coder sees skewed distributions. Scale is 1, 1e3, 1e6 or 1e9 (the largest
// that divides every v-base: times from µs-resolution captures shrink by
// 10 bits).
//
// The index file is
//
//	"WIX1", u32 version (1 or 2), u64 epoch (random per partition, new
//	whenever blocks are removed), u64 generation, u64 committed data
//	length, u16 iface name length, name, u32 entries, entries × {u64
//	offset, u32 block length, u32 header length, u32 rows, u32 reserved,
//	i64 min Start, i64 max End}, u32 CRC32C of all before it.
//
// Version 1 lists blocks back to back from offset 0; version 2, written
// only when needed, lets the first start later and leaves gaps (pruned
// blocks, damage a repair left in place), entries still ascending and
// not overlapping. The committed data length is the end of the last
// block. Journal records follow it, one a writeout (indexio.go):
//
//	"WIXJ", u64 generation (the previous one's + 1), u64 committed data
//	length, u32 entries, entries × 40 bytes (as above, after the last
//	block), u32 CRC32C of the whole file before this field.
//
// An index without records (any weir's) reads as before. The writer
// rewrites an index whole when it releases its partition (idle, or at
// Close), so an index at rest has none; a weir older than the journal reads
// one with records (a live writer's, or after a crash) as damaged and
// rebuilds it by scanning the data file.
//
// # Safety
//
// A writeout encodes and appends blocks to the data file under the writer
// lock and hands them to the committer, one goroutine that, in the order
// it was handed them, fsyncs the data file, then appends a journal record
// to the index and fsyncs that (a partition's first commit, every 256th,
// prune and repair instead write the whole index to a temp file, fsync it,
// rename it over the index and fsync the directory). Meanwhile the writer
// encodes the next block; at most 8 writeouts are in flight, their rows
// kept (and counted pending) until committed. Writeouts of one partition
// queued together commit as a group: one data fsync, one record naming
// all their blocks. After a failed commit the committer skips the rest
// until the writer has taken them back, so no record ever names blocks
// after an uncommitted one; their rows are buffered again and retried, and
// the failure is counted and returned by the next Flush, FlushAsync or
// Close. Flush returns once its blocks are committed, without holding the
// writer lock across the fsyncs. Readers use only blocks listed in the
// index they loaded, so they never see a block before its data fsync has
// returned; the writer truncates uncommitted tails when it reopens a
// partition. An index ending in a record cut short (a crash
// inside an append; a reader reads it again first, in case it raced the
// append) is rebuilt by scanning like a damaged one: the blocks of the
// cut record are kept, being intact. A failed append is cut back off the
// index before the writer retries its rows, and the retry rewrites the
// index under a new epoch (readers that loaded the cut record reload).
//
// Damage is never silent. A block whose header fails its CRC or does not
// match its index entry, or that lies past the end of its (cut) file, is
// skipped when listing; one whose columns fail their CRCs or do not decode
// is skipped when read. Each is counted once (Stats.CorruptBlocks) and said
// with its file, offset, size and the records lost, from the index
// (Stats.Warnings, Config.Log; BlocksDamaged returns those of a listing).
// An index that fails its CRC is rebuilt by scanning the data file, which
// resynchronises on the next verified block after a damaged stretch, so
// the good blocks after damage are kept. Open says what the indexes show
// (a damaged index, blocks past the end of a file), and the writer drops
// such entries before it appends, so it never extends a cut file with
// zeros. Check ('weir store check') verifies every block (its header and
// column CRCs, and that every column decodes) and every index against a
// scan of its file; with Repair it commits an index of the intact blocks
// and cuts the file after the last of them. Decoding allocates at most
// what the block's rows need and no column beyond 256 MiB, whatever a
// header claims.
package store
