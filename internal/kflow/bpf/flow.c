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
} __attribute__((preserve_access_index));

struct sk_buff___weir {
	struct net_device___weir *dev;
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

static __always_inline __u64 dev_netns(struct __sk_buff *skb)
{
	struct sk_buff___weir *kskb = bpf_cast_to_kern_ctx(skb);
	return BPF_CORE_READ(kskb, dev, nd_net.net, net_cookie);
}

#define TC_PASS 0 /* TC_ACT_OK; TCX_NEXT is -1, but 0 lets later programs run too */

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

struct flow_val {
	__u64 packets;
	__u64 bytes;
	__u64 first_ns;   // CLOCK_MONOTONIC (bpf_ktime_get_ns)
	__u64 last_ns;
	__u64 netns;      // netns cookie of the interface that counts the flow
	__u32 ifindex;    // its ifindex
	__u8 egress;      // 1: seen leaving that interface, 0: arriving
	__u8 nother;      // other interfaces that saw it (beyond other[])
	__u16 pad;
	__u32 marks;      // OR of counted packets' TCP flags (bits 0-7) and ROLE_* << 8
	__u32 pad2;
	__u64 other_netns[2];
	__u32 other_ifindex[2];
};

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

// Counters, per CPU: index by the COUNT_* constants.
enum {
	COUNT_PACKETS,      // packets looked at
	COUNT_NOT_IP,       // not IPv4 or IPv6, or too short to parse
	COUNT_DUP,          // seen again at another interface: not counted
	COUNT_INSERT_FAIL,  // map full (or other insert error): packet not counted in the map
	COUNT_NO_MAP,       // no active map (never, unless user space is gone)
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

// parse fills key from the packet at offset l3 (ethertype proto, network
// order) and returns the IP-layer length, or 0 if it is not an IP packet
// weir can key.
static __always_inline __u32 parse(struct __sk_buff *skb, __u32 l3, __u16 proto,
				   struct flow_key *key, __u8 *flags, __u8 *role)
{
	__u32 len, l4;
	__u8 nexthdr;
	int frag_later = 0;

	if (proto == bpf_htons(ETH_P_IP)) {
		__u8 ip[20];
		if (bpf_skb_load_bytes(skb, l3, ip, sizeof(ip)))
			return 0;
		if ((ip[0] >> 4) != 4 || (ip[0] & 0xf) < 5)
			return 0;
		len = ((__u32)ip[2] << 8) | ip[3];
		nexthdr = ip[9];
		// IPv4-mapped IPv6 ::ffff:a.b.c.d
		key->src[10] = 0xff; key->src[11] = 0xff;
		key->dst[10] = 0xff; key->dst[11] = 0xff;
		__builtin_memcpy(&key->src[12], &ip[12], 4);
		__builtin_memcpy(&key->dst[12], &ip[16], 4);
		frag_later = (((__u16)ip[6] << 8 | ip[7]) & 0x1fff) != 0;
		l4 = l3 + (ip[0] & 0xf) * 4;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		__u8 ip6[40];
		if (bpf_skb_load_bytes(skb, l3, ip6, sizeof(ip6)))
			return 0;
		if ((ip6[0] >> 4) != 6)
			return 0;
		len = (((__u32)ip6[4] << 8) | ip6[5]) + 40;
		nexthdr = ip6[6];
		__builtin_memcpy(key->src, &ip6[8], 16);
		__builtin_memcpy(key->dst, &ip6[24], 16);
		l4 = l3 + 40;
		// Extension headers: hop-by-hop, routing, fragment, destination
		// options, AH; a bounded walk.
#pragma unroll
		for (int i = 0; i < 6; i++) {
			__u8 ext[4];
			if (nexthdr != 0 && nexthdr != 43 && nexthdr != 44 && nexthdr != 60 && nexthdr != 51)
				break;
			if (bpf_skb_load_bytes(skb, l4, ext, sizeof(ext)))
				return 0;
			if (nexthdr == 44) { // fragment: 8 bytes; offset in bytes 2-3
				frag_later = (((__u16)ext[2] << 8 | ext[3]) & 0xfff8) != 0;
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
		return 0;
	}
	if (len == 0) // IPv4 TSO / BIG TCP: the length is the skb's
		len = skb->len - l3;
	key->proto = nexthdr;
	if (frag_later)
		return len; // later fragments carry no ports: keyed by addresses and protocol
	switch (nexthdr) {
	case IPPROTO_TCP: {
		__u8 tcp[14];
		if (bpf_skb_load_bytes(skb, l4, tcp, sizeof(tcp)))
			return len;
		key->sport = ((__u16)tcp[0] << 8) | tcp[1];
		key->dport = ((__u16)tcp[2] << 8) | tcp[3];
		*flags = tcp[13];
		if ((tcp[13] & 0x12) == 0x02)
			*role = ROLE_INITIATOR;
		else if ((tcp[13] & 0x12) == 0x12)
			*role = ROLE_RESPONDER;
		break;
	}
	case IPPROTO_UDP:
	case 132: { // SCTP: ports in the same place
		__u8 ports[4];
		if (bpf_skb_load_bytes(skb, l4, ports, sizeof(ports)))
			return len;
		key->sport = ((__u16)ports[0] << 8) | ports[1];
		key->dport = ((__u16)ports[2] << 8) | ports[3];
		break;
	}
	case IPPROTO_ICMP:
	case 58: { // ICMPv6
		__u8 tc[2];
		if (bpf_skb_load_bytes(skb, l4, tc, sizeof(tc)))
			return len;
		key->icmp_type = tc[0];
		key->icmp_code = tc[1];
		if ((nexthdr == IPPROTO_ICMP && (tc[0] == 8 || tc[0] == 13)) || (nexthdr == 58 && tc[0] == 128))
			*role = ROLE_INITIATOR;
		else if ((nexthdr == IPPROTO_ICMP && (tc[0] == 0 || tc[0] == 14)) || (nexthdr == 58 && tc[0] == 129))
			*role = ROLE_RESPONDER;
		break;
	}
	}
	return len;
}

static __always_inline int account(struct __sk_buff *skb, __u32 l3, __u8 egress)
{
	struct flow_key key = {};
	__u8 flags = 0, role = 0;
	__u32 zero = 0;

	count(COUNT_PACKETS);
	__u32 len = parse(skb, l3, skb->protocol, &key, &flags, &role);
	if (len == 0) {
		count(COUNT_NOT_IP);
		return TC_PASS;
	}
	void *m = bpf_map_lookup_elem(&active, &zero);
	if (!m) {
		count(COUNT_NO_MAP);
		return TC_PASS;
	}
	__u64 now = bpf_ktime_get_ns();
	__u64 netns = dev_netns(skb);
	__u32 ifindex = skb->ifindex;
	struct flow_val *v = bpf_map_lookup_elem(m, &key);
	if (!v) {
		struct flow_val nv = {
			.packets = 1, .bytes = len, .first_ns = now, .last_ns = now,
			.netns = netns, .ifindex = ifindex, .egress = egress,
			.marks = flags | (__u32)role << 8,
		};
		long err = bpf_map_update_elem(m, &key, &nv, BPF_NOEXIST);
		if (err == 0)
			return TC_PASS;
		if (err != -17) { // not -EEXIST: the map is full
			count(COUNT_INSERT_FAIL);
			return TC_PASS;
		}
		// Another CPU inserted it first: count on that entry.
		v = bpf_map_lookup_elem(m, &key);
		if (!v) {
			count(COUNT_INSERT_FAIL);
			return TC_PASS;
		}
	}
	if (v->ifindex != ifindex || v->netns != netns) {
		// A copy at another interface: note the interface, do not count.
		count(COUNT_DUP);
		if (v->other_ifindex[0] == 0 || (v->other_ifindex[0] == ifindex && v->other_netns[0] == netns)) {
			v->other_netns[0] = netns;
			v->other_ifindex[0] = ifindex;
		} else if (v->other_ifindex[1] == 0 || (v->other_ifindex[1] == ifindex && v->other_netns[1] == netns)) {
			v->other_netns[1] = netns;
			v->other_ifindex[1] = ifindex;
		} else if (v->nother < 255) {
			v->nother++;
		}
		return TC_PASS;
	}
	__sync_fetch_and_add(&v->packets, 1);
	__sync_fetch_and_add(&v->bytes, len);
	if (now > v->last_ns)
		v->last_ns = now; // racy between CPUs, off by at most a packet's time
	__u32 marks = flags | (__u32)role << 8;
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

char __license[] SEC("license") = "Dual BSD/GPL";
