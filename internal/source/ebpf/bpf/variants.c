// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// Map-design variants for BenchmarkMapDesign only (never loaded by a
// Source): flow.c's hit and insert path with the same key, parser and
// value size, counted three ways:
//   atomic:   one global hash, packets and bytes by atomic add (weir's choice)
//   spinlock: one global hash, the value under a bpf_spin_lock
//   percpu:   a per-CPU hash, plain adds to this CPU's copy
// Built by `make generate` into testdata/variants.o (little-endian).
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define TC_PASS -1
#define EEXIST 17

volatile const __u32 sampling = 1;

struct flow_key {
	__u8 src[16];
	__u8 dst[16];
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 icmp_type;
	__u8 icmp_code;
	__u8 pad;
};

#define ROLE_INITIATOR 1
#define ROLE_RESPONDER 2

#include "parse.h"

// The values are flow_val's size (128 bytes) so drains copy alike.
struct val {
	__u64 packets;
	__u64 bytes;
	__u64 first_ns;
	__u64 last_ns;
	__u32 ifindex;
	__u32 marks;
	__u8 rest[88];
};

struct val_lock {
	struct bpf_spin_lock lock;
	__u32 marks;
	__u64 packets;
	__u64 bytes;
	__u64 first_ns;
	__u64 last_ns;
	__u32 ifindex;
	__u8 rest[84];
};

// max_entries and flags are set by the benchmark.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct flow_key);
	__type(value, struct val);
} v_atomic SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct flow_key);
	__type(value, struct val_lock);
} v_spinlock SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1);
	__type(key, struct flow_key);
	__type(value, struct val);
} v_percpu SEC(".maps");

// key parses the packet; 0: not IP.
static __always_inline __u32 key(struct __sk_buff *skb, struct flow_key *k, struct pkt *p)
{
	struct src s = {.skb = skb};
	parse(&s, ETH_HLEN, skb->protocol, k, p);
	return p->len;
}

SEC("tc")
int weir_var_atomic(struct __sk_buff *skb)
{
	struct flow_key k = {};
	struct pkt p = {};
	if (!key(skb, &k, &p))
		return TC_PASS;
	struct val *v = bpf_map_lookup_elem(&v_atomic, &k);
	if (!v) {
		__u64 now = bpf_ktime_get_ns();
		struct val nv = {.packets = 1, .bytes = p.len, .first_ns = now, .last_ns = now,
				 .ifindex = skb->ifindex, .marks = p.flags};
		long err = bpf_map_update_elem(&v_atomic, &k, &nv, BPF_NOEXIST);
		if (err != -EEXIST)
			return TC_PASS;
		if (!(v = bpf_map_lookup_elem(&v_atomic, &k)))
			return TC_PASS;
	}
	if (v->ifindex != skb->ifindex)
		return TC_PASS;
	__sync_fetch_and_add(&v->packets, 1);
	__sync_fetch_and_add(&v->bytes, p.len);
	__u64 now = bpf_ktime_get_coarse_ns();
	if (now > v->last_ns)
		v->last_ns = now;
	if ((v->marks & p.flags) != p.flags)
		__sync_fetch_and_or(&v->marks, p.flags);
	return TC_PASS;
}

SEC("tc")
int weir_var_spinlock(struct __sk_buff *skb)
{
	struct flow_key k = {};
	struct pkt p = {};
	if (!key(skb, &k, &p))
		return TC_PASS;
	struct val_lock *v = bpf_map_lookup_elem(&v_spinlock, &k);
	if (!v) {
		__u64 now = bpf_ktime_get_ns();
		struct val_lock nv = {.packets = 1, .bytes = p.len, .first_ns = now, .last_ns = now,
				      .ifindex = skb->ifindex, .marks = p.flags};
		long err = bpf_map_update_elem(&v_spinlock, &k, &nv, BPF_NOEXIST);
		if (err != -EEXIST)
			return TC_PASS;
		if (!(v = bpf_map_lookup_elem(&v_spinlock, &k)))
			return TC_PASS;
	}
	if (v->ifindex != skb->ifindex)
		return TC_PASS;
	__u64 now = bpf_ktime_get_coarse_ns();
	bpf_spin_lock(&v->lock);
	v->packets++;
	v->bytes += p.len;
	if (now > v->last_ns)
		v->last_ns = now;
	v->marks |= p.flags;
	bpf_spin_unlock(&v->lock);
	return TC_PASS;
}

SEC("tc")
int weir_var_percpu(struct __sk_buff *skb)
{
	struct flow_key k = {};
	struct pkt p = {};
	if (!key(skb, &k, &p))
		return TC_PASS;
	struct val *v = bpf_map_lookup_elem(&v_percpu, &k);
	if (!v) {
		__u64 now = bpf_ktime_get_ns();
		struct val nv = {.packets = 1, .bytes = p.len, .first_ns = now, .last_ns = now,
				 .ifindex = skb->ifindex, .marks = p.flags};
		bpf_map_update_elem(&v_percpu, &k, &nv, BPF_NOEXIST);
		return TC_PASS;
	}
	if (v->ifindex != skb->ifindex)
		return TC_PASS;
	v->packets++;
	v->bytes += p.len;
	__u64 now = bpf_ktime_get_coarse_ns();
	if (now > v->last_ns)
		v->last_ns = now;
	v->marks |= p.flags;
	return TC_PASS;
}

char __license[] SEC("license") = "Dual BSD/GPL";
