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

struct sock_common___weir {
	possible_net_t___weir skc_net;
} __attribute__((preserve_access_index));

struct sock___weir {
	struct sock_common___weir __sk_common;
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
	__u64 packets;
	__u64 bytes;
	__u64 first_ns;   // CLOCK_MONOTONIC (bpf_ktime_get_ns)
	__u64 last_ns;
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

// watched holds the netns cookies of the namespaces weir watches: the drop
// program attributes only their drops (the tracepoint sees every one).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u64);
	__type(value, __u8);
} watched SEC(".maps");

// Dropped packets by skb_drop_reason, per CPU (255: reasons past 254 and
// subsystems' reasons).
#define DROP_REASONS 256
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DROP_REASONS);
	__type(key, __u32);
	__type(value, __u64);
} drop_reasons SEC(".maps");

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

// pkt is what parse learns of a packet beyond its key.
struct pkt {
	__u32 len;        // IP-layer bytes; 0: not a packet weir keys
	__u32 frag_id;
	__u32 salt;       // per-packet bytes that hop-by-hop forwarding keeps (IPv4 ID, L4 seq/checksum)
	__u8 flags;
	__u8 role;
	__u8 frag;        // FRAG_*
};

#define FRAG_FIRST 1
#define FRAG_LATER 2

// src is where parse reads a packet: a tc program's skb, or (skb NULL)
// kernel memory, at the network header, that a tracepoint points at.
struct src {
	struct __sk_buff *skb;
	const __u8 *base; // network header (skb NULL)
	__u32 len;        // bytes from the network header on (skb NULL)
};

// load copies len bytes at off from the packet: straight from the linear
// data when they are there (most packets), else with the helper.
static __always_inline long load(const struct src *s, __u32 off, void *to, const __u32 len)
{
	if (!s->skb)
		return bpf_probe_read_kernel(to, len, s->base + off);
	struct __sk_buff *skb = s->skb;
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	if (off <= 512 && data + off + len <= end) { // off bounded for the verifier
		__builtin_memcpy(to, data + off, len);
		return 0;
	}
	return bpf_skb_load_bytes(skb, off, to, len);
}

// parse fills key and p from the packet at offset l3 (ethertype proto,
// network order); p->len stays 0 if it is not an IP packet weir can key.
static __always_inline void parse(const struct src *s, __u32 l3, __u16 proto,
				  struct flow_key *key, struct pkt *p)
{
	__u32 len, l4;
	__u8 nexthdr;

	if (proto == bpf_htons(ETH_P_IP)) {
		__u8 ip[20];
		if (load(s, l3, ip, sizeof(ip)))
			return;
		if ((ip[0] >> 4) != 4 || (ip[0] & 0xf) < 5)
			return;
		len = ((__u32)ip[2] << 8) | ip[3];
		nexthdr = ip[9];
		// IPv4-mapped IPv6 ::ffff:a.b.c.d
		key->src[10] = 0xff; key->src[11] = 0xff;
		key->dst[10] = 0xff; key->dst[11] = 0xff;
		__builtin_memcpy(&key->src[12], &ip[12], 4);
		__builtin_memcpy(&key->dst[12], &ip[16], 4);
		__u16 off = (__u16)ip[6] << 8 | ip[7];
		p->frag_id = (__u32)ip[4] << 8 | ip[5];
		p->salt = p->frag_id << 16 | len;
		if (off & 0x1fff)
			p->frag = FRAG_LATER;
		else if (off & 0x2000)
			p->frag = FRAG_FIRST;
		l4 = l3 + (ip[0] & 0xf) * 4;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		__u8 ip6[40];
		if (load(s, l3, ip6, sizeof(ip6)))
			return;
		if ((ip6[0] >> 4) != 6)
			return;
		len = (((__u32)ip6[4] << 8) | ip6[5]) + 40;
		nexthdr = ip6[6];
		__builtin_memcpy(key->src, &ip6[8], 16);
		__builtin_memcpy(key->dst, &ip6[24], 16);
		p->salt = len;
		l4 = l3 + 40;
		// Extension headers: hop-by-hop, routing, fragment, destination
		// options, AH; a bounded walk.
#pragma unroll
		for (int i = 0; i < 6; i++) {
			__u8 ext[8];
			if (nexthdr != 0 && nexthdr != 43 && nexthdr != 44 && nexthdr != 60 && nexthdr != 51)
				break;
			if (load(s, l4, ext, sizeof(ext)))
				return;
			if (nexthdr == 44) { // fragment: offset and M in bytes 2-3, ID in 4-7
				__u16 off = (__u16)ext[2] << 8 | ext[3];
				p->frag_id = (__u32)ext[4] << 24 | (__u32)ext[5] << 16 | (__u32)ext[6] << 8 | ext[7];
				if (off & 0xfff8)
					p->frag = FRAG_LATER;
				else if (off & 1)
					p->frag = FRAG_FIRST;
				nexthdr = ext[0];
				l4 += 8;
			} else if (nexthdr == 51) { // AH: (len+2)*4
				nexthdr = ext[0];
				l4 += ((__u32)ext[1] + 2) * 4;
			} else {
				nexthdr = ext[0];
				l4 += ((__u32)ext[1] + 1) * 8;
			}
		}
	} else {
		return;
	}
	if (len == 0) // IPv4 TSO / BIG TCP: the length is the skb's
		len = s->skb ? s->skb->len - l3 : s->len;
	key->proto = nexthdr;
	p->len = len;
	if (p->frag == FRAG_LATER)
		return; // no L4 header: account() looks the ports up
	switch (nexthdr) {
	case IPPROTO_TCP: {
		__u8 tcp[14];
		if (load(s, l4, tcp, sizeof(tcp)))
			return;
		key->sport = ((__u16)tcp[0] << 8) | tcp[1];
		key->dport = ((__u16)tcp[2] << 8) | tcp[3];
		p->flags = tcp[13];
		if (sampling > 1) { // a constant: the verifier drops this when sampling is off
			p->salt ^= (__u32)tcp[4] << 24 | (__u32)tcp[5] << 16 | (__u32)tcp[6] << 8 | tcp[7]; // sequence number
			p->salt ^= ((__u32)tcp[8] << 24 | (__u32)tcp[9] << 16 | (__u32)tcp[10] << 8 | tcp[11]) * 0x9e3779b1; // ack
		}
		if ((tcp[13] & 0x12) == 0x02)
			p->role = ROLE_INITIATOR;
		else if ((tcp[13] & 0x12) == 0x12)
			p->role = ROLE_RESPONDER;
		break;
	}
	case IPPROTO_UDP:
	case 132: { // SCTP: ports in the same place
		__u8 ports[8];
		if (load(s, l4, ports, sizeof(ports)))
			return;
		key->sport = ((__u16)ports[0] << 8) | ports[1];
		key->dport = ((__u16)ports[2] << 8) | ports[3];
		if (sampling > 1)
			p->salt ^= (__u32)ports[4] << 24 | (__u32)ports[5] << 16 | (__u32)ports[6] << 8 | ports[7]; // UDP length, checksum; SCTP tag
		break;
	}
	case IPPROTO_ICMP:
	case 58: { // ICMPv6
		__u8 tc[8];
		if (load(s, l4, tc, sizeof(tc)))
			return;
		key->icmp_type = tc[0];
		key->icmp_code = tc[1];
		if (sampling > 1)
			p->salt ^= (__u32)tc[2] << 24 | (__u32)tc[3] << 16 | (__u32)tc[6] << 8 | tc[7]; // checksum, sequence
		if ((nexthdr == IPPROTO_ICMP && (tc[0] == 8 || tc[0] == 13)) || (nexthdr == 58 && tc[0] == 128))
			p->role = ROLE_INITIATOR;
		else if ((nexthdr == IPPROTO_ICMP && (tc[0] == 0 || tc[0] == 14)) || (nexthdr == 58 && tc[0] == 129))
			p->role = ROLE_RESPONDER;
		break;
	}
	}
}

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
			.packets = 1, .bytes = p.len, .first_ns = now, .last_ns = now,
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
	__sync_fetch_and_add(&v->packets, 1);
	__sync_fetch_and_add(&v->bytes, p.len);
	// The tick-resolution clock: bpf_ktime_get_ns costs ~45 ns per packet
	// on a VM's TSC, this a few. It lags the exact clock by up to a tick,
	// so a last time can read earlier than the first (user space clamps).
	now = bpf_ktime_get_coarse_ns();
	if (now > v->last_ns)
		v->last_ns = now; // racy between CPUs, off by at most a packet's time
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

// weir_drops attributes packets the kernel drops (kfree_skb; normal
// frees go to consume_skb) in a watched namespace to their flow: drop
// packets, bytes and the latest reason on its entry. A flow with no entry
// gets one with no packets counted, owned by the dropping device (none if
// the skb had none), so a flow whose every packet is dropped is reported.
//
// A raw tracepoint: attaching needs no tracefs (absent where weir runs
// under "ip netns exec", which remounts /sys), and the arguments are read
// as passed: trace_kfree_skb(skb, location, reason[, rx_sk]) since Linux
// 5.17 (older kernels refuse the third argument at attach).
SEC("raw_tracepoint/kfree_skb")
int weir_drops(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 reason = (__u32)ctx->args[2];
	if (reason == drop_skip)
		return 0;
	struct sk_buff___weir *skb = (void *)ctx->args[0];
	struct net_device___weir *dev = BPF_CORE_READ(skb, dev);
	__u64 netns = 0;
	__u32 ifindex = 0;
	if (dev) {
		netns = BPF_CORE_READ(dev, nd_net.net, net_cookie);
		ifindex = BPF_CORE_READ(dev, ifindex);
	} else {
		struct sock___weir *sk = BPF_CORE_READ(skb, sk);
		if (sk)
			netns = BPF_CORE_READ(sk, __sk_common.skc_net.net, net_cookie);
	}
	if (!netns || !bpf_map_lookup_elem(&watched, &netns))
		return 0;
	__u32 ri = reason < DROP_REASONS - 1 ? reason : DROP_REASONS - 1;
	__u64 *rc = bpf_map_lookup_elem(&drop_reasons, &ri);
	if (rc)
		*rc += 1;

	unsigned char *head = BPF_CORE_READ(skb, head);
	unsigned char *data = BPF_CORE_READ(skb, data);
	__u16 nh = BPF_CORE_READ(skb, network_header);
	if (nh == 0xffff) { // not set: dropped before the stack parsed it
		count(COUNT_DROPS_UNKEYED);
		return 0;
	}
	struct src s = {.base = head + nh, .len = BPF_CORE_READ(skb, len) + (__u32)(data - head) - nh};
	struct flow_key key = {};
	struct pkt p = {};
	parse(&s, 0, BPF_CORE_READ(skb, protocol), &key, &p);
	if (p.len == 0) {
		count(COUNT_DROPS_UNKEYED);
		return 0;
	}
	if (p.frag)
		fragment(&key, &p, 0);
	if (sampled_out(&key, &p, 0))
		return 0;
	__u32 zero = 0;
	void *m = bpf_map_lookup_elem(&active, &zero);
	if (!m)
		return 0;
	__u16 r16 = reason < 0xffff ? reason : 0xffff;
	struct flow_val *v = bpf_map_lookup_elem(m, &key);
	if (!v) {
		__u64 now = bpf_ktime_get_ns();
		struct flow_val nv = {
			.first_ns = now, .last_ns = now, .netns = dev ? netns : 0, .ifindex = ifindex,
			.drop_packets = 1, .drop_bytes = p.len, .drop_reason = r16,
		};
		long err = bpf_map_update_elem(m, &key, &nv, BPF_NOEXIST);
		if (err == 0) {
			count(COUNT_INSERTS);
			count(COUNT_DROPS);
			return 0;
		}
		if (err == -EEXIST)
			v = bpf_map_lookup_elem(m, &key);
		if (!v) {
			count(COUNT_DROPS_LOST);
			return 0;
		}
	}
	__sync_fetch_and_add(&v->drop_packets, 1);
	__sync_fetch_and_add(&v->drop_bytes, p.len);
	v->drop_reason = r16;
	if (v->packets == 0) // a flow only drops made: its times are theirs
		v->last_ns = bpf_ktime_get_ns();
	count(COUNT_DROPS);
	return 0;
}

// An empty program: benchmarks attach it to measure what the kernel's own
// run-time accounting costs per packet. Never loaded by a Source.
SEC("tc")
int weir_noop(struct __sk_buff *skb) { return TC_PASS; }

char __license[] SEC("license") = "Dual BSD/GPL";
