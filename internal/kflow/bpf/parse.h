// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// Packet parsing for flow.c (included there, after struct flow_key, the
// ROLE_* hints and the sampling constant): the flow key, the IP-layer
// length, TCP flags, a role hint and fragment facts of a packet, read
// from a tc program's skb or from kernel memory a tracepoint points at.

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
