// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// weir's in-kernel flow aggregation: TCX (or clsact) programs on ingress
// and egress add every IP packet to a hash map keyed by its 5-tuple (ICMP
// type and code in place of ports; IPv4 as IPv4-mapped IPv6). User space
// swaps the map for an empty one and drains the old one (see kflow.go).
//
// Dedup: a packet is counted at the first interface (netns cookie and
// ifindex) that saw its flow in this map; other interfaces only note that
// they saw it. Bytes are IP-layer bytes (IPv4 total length, IPv6 payload
// length + 40), as everywhere in weir.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

// The interface's network namespace, read from the kernel's sk_buff with
// CO-RE (bpf_get_netns_cookie(skb) gives the socket's namespace, which for
// a packet that crossed a veth is the sender's): dev->nd_net.net->net_cookie.
struct net___weir {
	__u64 net_cookie;
} __attribute__((preserve_access_index));

typedef struct {
	struct net___weir *net;
} possible_net_t___weir;

struct net_device___weir {
	possible_net_t___weir nd_net;
	int ifindex;
} __attribute__((preserve_access_index));

struct sk_buff___weir {
	struct net_device___weir *dev;
	struct sock___weir *sk;
	unsigned char *head;
	unsigned char *data;
	unsigned int len;
	__u16 network_header;
	__u16 protocol; // network order
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

static __always_inline __u64 dev_netns(struct __sk_buff *skb)
{
	// Plain loads, not BPF_CORE_READ: the cast gives a BTF pointer the
	// verifier lets us walk with (fault-safe) loads, while BPF_CORE_READ
	// would make three bpf_probe_read_kernel calls per packet.
	struct sk_buff___weir *kskb = bpf_cast_to_kern_ctx(skb);
	return kskb->dev->nd_net.net->net_cookie;
}

// TC_ACT_UNSPEC, which TCX calls TCX_NEXT: the packet goes on to the
// next program or filter on the hook (another tool's). 0 (TC_ACT_OK,
// TCX_PASS) would end the chain there and skip them.
#define TC_PASS -1
#define E2BIG 7
#define ENOMEM 12
#define EEXIST 17

// Set by user space before loading (constants: the verifier prunes what
// they turn off).
volatile const __u32 sampling = 1;      // count 1 in sampling packets (1: all)
volatile const __u32 sample_flows = 0;  // 1: sample whole flows by hash; 0: packets by content hash
volatile const __u32 overflow_ring = 1; // 1: packets the map has no room for go to the ring buffer
volatile const __u32 drop_skip = 0xffffffff; // SKB_CONSUMED's value in this kernel: not a drop

// A packet's count and bytes go into one 64-bit word, so counting costs
// one atomic add, not two (~9 ns each on a VM): bytes in the low 40 bits,
// packets in the high 24. The add that takes a field to carry_bytes or
// carry_packets (half its range; tests lower them) moves that much into
// carry, so neither field overflows and the counts stay exact. carry_bytes
// must exceed any packet's length.
#define PB_SHIFT 40
#define PB_BYTES ((1ULL << PB_SHIFT) - 1)
volatile const __u64 carry_packets = 1ULL << 23;
volatile const __u64 carry_bytes = 1ULL << 39;

struct flow_key {
	__u8 src[16];
	__u8 dst[16];
	__u16 sport;      // host order; ICMP: 0
	__u16 dport;      // host order; ICMP: 0
	__u8 proto;
	__u8 icmp_type;
	__u8 icmp_code;
	__u8 pad;
};

// Role hints, as flow.Role: what a packet says about who opened the flow.
#define ROLE_INITIATOR 1 // TCP SYN without ACK, ICMP echo request
#define ROLE_RESPONDER 2 // TCP SYN+ACK, ICMP echo reply

// flow_other is another interface that saw the flow, with what it saw
// (not counted in the flow: user space's table uses these counts only if
// it counts this flow at that interface, see kflow.go).
struct flow_other {
	__u64 netns;
	__u32 ifindex;    // 0: free
	__u32 pad;
	__u64 packets;
	__u64 bytes;
};

struct flow_val {
	__u64 pb;         // packets << PB_SHIFT | bytes: see count_packet
	__u64 carry;      // what count_packet moved out of pb: packet carries << 32 | byte carries
	__u64 first_ns;   // CLOCK_MONOTONIC (bpf_ktime_get_ns), exact
	__u64 last_j;     // jiffies at the latest packet (see weir_clock)
	__u64 netns;      // netns cookie of the interface that counts the flow
	__u32 ifindex;    // its ifindex
	__u8 egress;      // 1: seen leaving that interface, 0: arriving
	__u8 nother;      // other interfaces that saw it beyond other[]
	__u16 drop_reason; // the latest drop's skb_drop_reason (0xffff: a subsystem's)
	__u32 marks;      // OR of counted packets' TCP flags (bits 0-7) and ROLE_* << 8
	__u32 drop_packets; // packets of the flow the kernel dropped (weir_drops)
	__u64 drop_bytes;
	struct flow_other other[2];
};

// For bpf2go: puts the value's whole type in BTF (the map of maps'
// inner map refers to it, which clang may emit as a forward declaration).
const struct flow_val *unused_flow_val __attribute__((unused));

// flows is the shape of the flow maps; user space does not create it but
// two maps of its spec (MaxFlows entries each), and keeps one in active.
struct flows_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); // set by user space (--ebpf-max-flows)
	__type(key, struct flow_key);
	__type(value, struct flow_val);
} flows SEC(".maps");

// active holds the map the programs write to. User space replaces it with
// an empty one before draining the old: the update waits for running
// programs (maps of maps do), so a drained map is never written again.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct flows_map);
} active SEC(".maps");

// overflow_rec is one packet the flow map had no room for.
struct overflow_rec {
	struct flow_key key;
	__u64 ts;         // CLOCK_MONOTONIC
	__u64 j;          // jiffies, as flow_val's last_j
	__u64 netns;
	__u32 ifindex;
	__u32 len;        // IP-layer bytes
	__u8 egress;
	__u8 flags;       // TCP flags
	__u8 role;
	__u8 pad[5];
};

// For bpf2go: puts the record's type in BTF (the ring has none).
const struct overflow_rec *unused_overflow_rec __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20); // set by user space
} overflow SEC(".maps");

// fragment_key names the fragments of one datagram; fragments after the
// first carry no ports, so the first leaves them here.
struct fragment_key {
	__u8 src[16];
	__u8 dst[16];
	__u32 id;
	__u8 proto;
	__u8 pad[3];
};

struct fragment_ports {
	__u16 sport;
	__u16 dport;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct fragment_key);
	__type(value, struct fragment_ports);
} fragments SEC(".maps");

// Counters, per CPU: index by the COUNT_* constants.
enum {
	COUNT_PACKETS,       // packets looked at
	COUNT_NOT_IP,        // not IPv4 or IPv6, or too short to parse
	COUNT_DUP,           // seen again at another interface: not counted
	COUNT_INSERT_E2BIG,  // the map was full: packet not in the map
	COUNT_INSERT_ENOMEM, // no memory for the entry: packet not in the map
	COUNT_INSERT_OTHER,  // another insert error: packet not in the map
	COUNT_NO_MAP,        // no active map (never, unless user space is gone)
	COUNT_RING,          // packets sent to the overflow ring
	COUNT_LOST,          // not in the map and the ring full (or off): lost, counted
	COUNT_SAMPLED_OUT,   // skipped by sampling
	COUNT_FRAG_FIRST,    // first fragments (ports remembered)
	COUNT_FRAG_FOUND,    // later fragments given their datagram's ports
	COUNT_FRAG_MISSING,  // later fragments whose first was not seen: no ports
	COUNT_INSERTS,       // entries created in the flow maps
	COUNT_DROPS,         // dropped packets attributed to flows (weir_drops)
	COUNT_DROPS_LOST,    // dropped packets whose flow got no entry (map full)
	COUNT_DROPS_UNKEYED, // dropped packets in watched namespaces weir could not key (not IP, no header)
	COUNT_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &i);
	if (v)
		*v += 1;
}

#include "parse.h"

// fragment gives a later fragment the ports its first fragment had, and
// remembers a first fragment's.
static __always_inline void fragment(struct flow_key *key, struct pkt *p, int counted)
{
	struct fragment_key fk = {};
	__builtin_memcpy(fk.src, key->src, 16);
	__builtin_memcpy(fk.dst, key->dst, 16);
	fk.id = p->frag_id;
	fk.proto = key->proto;
	if (p->frag == FRAG_FIRST) {
		if (!counted)
			return; // the tc program saw it: its ports are remembered
		struct fragment_ports fp = {key->sport, key->dport};
		bpf_map_update_elem(&fragments, &fk, &fp, BPF_ANY);
		count(COUNT_FRAG_FIRST);
		return;
	}
	struct fragment_ports *fp = bpf_map_lookup_elem(&fragments, &fk);
	if (!fp) {
		if (counted)
			count(COUNT_FRAG_MISSING);
		return;
	}
	key->sport = fp->sport;
	key->dport = fp->dport;
	if (counted)
		count(COUNT_FRAG_FOUND);
}

// mix is a 32-bit finaliser (murmur3's): every input bit moves every output bit.
static __always_inline __u32 mix(__u32 h)
{
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

// sampled_out reports whether sampling skips this packet. The choice
// depends only on the packet's content (or its flow's, in both
// directions), so every interface that sees it chooses alike and the
// dedup rule still holds.
static __always_inline int sampled_out(struct flow_key *key, struct pkt *p, int counted)
{
	if (sampling <= 1)
		return 0;
	__u32 h;
	if (sample_flows) {
		// XOR of both endpoints: the same for both directions.
		__u32 w[8];
		__builtin_memcpy(w, key->src, 16);
		__builtin_memcpy(&w[4], key->dst, 16);
		h = w[0] ^ w[1] ^ w[2] ^ w[3] ^ w[4] ^ w[5] ^ w[6] ^ w[7];
		h ^= ((__u32)key->sport ^ key->dport) | (__u32)key->proto << 16;
	} else {
		__u32 w[8];
		__builtin_memcpy(w, key->src, 16);
		__builtin_memcpy(&w[4], key->dst, 16);
		h = p->salt ^ mix(w[3] ^ w[7] ^ ((__u32)key->sport << 16 | key->dport));
	}
	if (mix(h) % sampling == 0)
		return 0;
	if (counted)
		count(COUNT_SAMPLED_OUT);
	return 1;
}

// spill sends a packet the map had no room for to user space, which
// aggregates it with the same dedup rule.
static __always_inline void spill(struct flow_key *key, struct pkt *p, __u64 now, __u64 netns,
				  __u32 ifindex, __u8 egress)
{
	if (!overflow_ring) {
		count(COUNT_LOST);
		return;
	}
	struct overflow_rec *r = bpf_ringbuf_reserve(&overflow, sizeof(*r), 0);
	if (!r) {
		count(COUNT_LOST);
		return;
	}
	__builtin_memcpy(&r->key, key, sizeof(*key));
	r->ts = now;
	r->j = bpf_jiffies64();
	r->netns = netns;
	r->ifindex = ifindex;
	r->len = p->len;
	r->egress = egress;
	r->flags = p->flags;
	r->role = p->role;
	__builtin_memset(r->pad, 0, sizeof(r->pad));
	bpf_ringbuf_submit(r, 0);
	count(COUNT_RING);
}

// count_packet adds one packet of len bytes to pb, carrying as above.
static __always_inline void count_packet(__u64 *pb, __u64 *carry, __u32 len)
{
	__u64 old = __sync_fetch_and_add(pb, (1ULL << PB_SHIFT) | len);
	__u64 op = old >> PB_SHIFT, ob = old & PB_BYTES;
	if (op < carry_packets && op + 1 >= carry_packets) { // once per carry_packets packets
		__sync_fetch_and_sub(pb, carry_packets << PB_SHIFT);
		__sync_fetch_and_add(carry, 1ULL << 32);
	}
	if (ob < carry_bytes && ob + len >= carry_bytes) { // once per carry_bytes bytes
		__sync_fetch_and_sub(pb, carry_bytes);
		__sync_fetch_and_add(carry, 1);
	}
}

// other notes that the interface (netns, ifindex) saw a packet of v's
// flow that v counts elsewhere, and adds it to that interface's counts.
static __always_inline void other(struct flow_val *v, __u64 netns, __u32 ifindex, __u32 len)
{
#pragma unroll
	for (int i = 0; i < 2; i++) {
		struct flow_other *o = &v->other[i];
		if (o->ifindex == 0) // claim a free slot; another CPU may race for it
			__sync_val_compare_and_swap(&o->ifindex, 0, ifindex);
		if (o->ifindex == ifindex) {
			if (o->netns == 0)
				o->netns = netns;
			if (o->netns == netns) {
				__sync_fetch_and_add(&o->packets, 1);
				__sync_fetch_and_add(&o->bytes, len);
				return;
			}
		}
	}
	if (v->nother < 255)
		v->nother++;
}

static __always_inline int account(struct __sk_buff *skb, __u32 l3, __u8 egress)
{
	struct flow_key key = {};
	struct pkt p = {};
	__u32 zero = 0;

	struct src s = {.skb = skb};

	count(COUNT_PACKETS);
	parse(&s, l3, skb->protocol, &key, &p);
	if (p.len == 0) {
		count(COUNT_NOT_IP);
		return TC_PASS;
	}
	if (p.frag)
		fragment(&key, &p, 1);
	if (sampled_out(&key, &p, 1))
		return TC_PASS;
	void *m = bpf_map_lookup_elem(&active, &zero);
	if (!m) {
		count(COUNT_NO_MAP);
		return TC_PASS;
	}
	__u64 netns = dev_netns(skb);
	__u32 ifindex = skb->ifindex;
	__u64 now;
	struct flow_val *v = bpf_map_lookup_elem(m, &key);
	if (!v) {
		now = bpf_ktime_get_ns(); // exact first-packet time: once per flow and drain
		struct flow_val nv = {
			.pb = (1ULL << PB_SHIFT) | p.len, .first_ns = now, .last_j = bpf_jiffies64(),
			.netns = netns, .ifindex = ifindex, .egress = egress,
			.marks = p.flags | (__u32)p.role << 8,
		};
		long err = bpf_map_update_elem(m, &key, &nv, BPF_NOEXIST);
		if (err == 0) {
			count(COUNT_INSERTS);
			return TC_PASS;
		}
		if (err == -EEXIST) // another CPU inserted it first: count on that entry
			v = bpf_map_lookup_elem(m, &key);
		if (!v) {
			if (err == -E2BIG)
				count(COUNT_INSERT_E2BIG);
			else if (err == -ENOMEM)
				count(COUNT_INSERT_ENOMEM);
			else
				count(COUNT_INSERT_OTHER);
			spill(&key, &p, now, netns, ifindex, egress);
			return TC_PASS;
		}
	}
	if (v->ifindex != ifindex || v->netns != netns) {
		// A copy at another interface: not counted in the flow.
		count(COUNT_DUP);
		other(v, netns, ifindex, p.len);
		return TC_PASS;
	}
	count_packet(&v->pb, &v->carry, p.len);
	// The tick counter: bpf_ktime_get_ns costs ~45 ns per packet on a
	// VM's TSC, bpf_ktime_get_coarse_ns a helper call, and jiffies one load
	// (the verifier inlines it). User space turns it into a time to within
	// a tick (weir_clock), so a last time can read earlier than the first
	// (user space clamps).
	__u64 j = bpf_jiffies64();
	if (j > v->last_j)
		v->last_j = j; // racy between CPUs, off by at most a packet's time
	__u32 marks = p.flags | (__u32)p.role << 8;
	if ((v->marks & marks) != marks) // read first: the atomic only when something is new
		__sync_fetch_and_or(&v->marks, marks);
	return TC_PASS;
}

// Ethernet links: the IP header follows 14 bytes of Ethernet (VLAN tags
// are offloaded into the skb on veth and most NICs).
SEC("tc")
int weir_flow_eth_ingress(struct __sk_buff *skb) { return account(skb, ETH_HLEN, 0); }

SEC("tc")
int weir_flow_eth_egress(struct __sk_buff *skb) { return account(skb, ETH_HLEN, 1); }

// Raw IP links (tun, wireguard): the IP header is first.
SEC("tc")
int weir_flow_ip_ingress(struct __sk_buff *skb) { return account(skb, 0, 0); }

SEC("tc")
int weir_flow_ip_egress(struct __sk_buff *skb) { return account(skb, 0, 1); }

#include "drops.h"

// weir_clock reads both clocks at once for user space (run with
// BPF_PROG_TEST_RUN at each drain), which maps a flow's last_j to
// CLOCK_MONOTONIC with it: clock_ns - (clock_j - last_j) * tick.
__u64 clock_j, clock_ns;

SEC("tc")
int weir_clock(struct __sk_buff *skb)
{
	clock_j = bpf_jiffies64();
	clock_ns = bpf_ktime_get_ns();
	return TC_PASS;
}

// An empty program: benchmarks attach it to measure what the kernel's own
// run-time accounting costs per packet. Never loaded by a Source.
SEC("tc")
int weir_noop(struct __sk_buff *skb) { return TC_PASS; }

char __license[] SEC("license") = "Dual BSD/GPL";
