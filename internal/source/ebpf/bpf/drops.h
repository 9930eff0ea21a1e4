// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// The drop program for flow.c (included there, after account()): packets
// the kernel drops, put on their flows with the reason (Config.Drops).

struct sock_common___weir {
	possible_net_t___weir skc_net;
} __attribute__((preserve_access_index));

struct sock___weir {
	struct sock_common___weir __sk_common;
} __attribute__((preserve_access_index));

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
			.first_ns = now, .last_j = bpf_jiffies64(), .netns = dev ? netns : 0, .ifindex = ifindex,
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
	if (v->pb == 0 && v->carry == 0) // a flow only drops made: its times are theirs
		v->last_j = bpf_jiffies64();
	count(COUNT_DROPS);
	return 0;
}
