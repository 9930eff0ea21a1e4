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

// at returns len bytes at off of the packet: a pointer into the linear
// data when they are there (most packets: no copy), else buf filled by the
// helper; NULL if the packet is shorter. Fields are then read through the
// header structs below, so the compiler emits word loads, not byte loads.
static __always_inline const void *at(const struct src *s, __u32 off, void *buf, const __u32 len)
{
	if (!s->skb)
		return bpf_probe_read_kernel(buf, len, s->base + off) ? NULL : buf;
	struct __sk_buff *skb = s->skb;
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	if (off <= 512 && data + off + len <= end) // off bounded for the verifier
		return data + off;
	return bpf_skb_load_bytes(skb, off, buf, len) ? NULL : buf;
}

// The headers' leading bytes, as parse reads them (network order).
struct ip4_hdr {
	__u8 vhl;
	__u8 tos;
	__u16 tot_len;
	__u16 id;
	__u16 frag_off;
	__u8 ttl;
	__u8 proto;
	__u16 check;
	__u32 src;
	__u32 dst;
};

struct ip6_hdr {
	__u32 vtcfl;
	__u16 plen;
	__u8 next;
	__u8 hlim;
	__u32 src[4];
	__u32 dst[4];
};

struct ext_hdr { // IPv6 extension header; the fragment header's fields
	__u8 next;
	__u8 len;
	__u16 frag_off;
	__u32 id;
};

struct tcp_hdr {
	__u16 sport;
	__u16 dport;
	__u32 seq;
	__u32 ack;
	__u8 doff;
	__u8 flags;
};

struct ports_hdr { // UDP, and SCTP (ports in the same place)
	__u16 sport;
	__u16 dport;
	__u32 rest; // UDP length and checksum; SCTP verification tag
};

struct icmp_hdr {
	__u8 type;
	__u8 code;
	__u16 check;
	__u16 id;
	__u16 seq;
};

// parse fills key and p from the packet at offset l3 (ethertype proto,
// network order); p->len stays 0 if it is not an IP packet weir can key.
static __always_inline void parse(const struct src *s, __u32 l3, __u16 proto,
				  struct flow_key *key, struct pkt *p)
{
	__u32 len, l4;
	__u8 nexthdr;
	__u64 buf[5]; // room for the largest header read (IPv6's 40 bytes)

	if (proto == bpf_htons(ETH_P_IP)) {
		const struct ip4_hdr *ip = at(s, l3, buf, sizeof(*ip));
		if (!ip || (ip->vhl >> 4) != 4 || (ip->vhl & 0xf) < 5)
			return;
		len = bpf_ntohs(ip->tot_len);
		nexthdr = ip->proto;
		// IPv4-mapped IPv6 ::ffff:a.b.c.d
		*(__u32 *)&key->src[8] = bpf_htonl(0xffff);
		*(__u32 *)&key->dst[8] = bpf_htonl(0xffff);
		*(__u32 *)&key->src[12] = ip->src;
		*(__u32 *)&key->dst[12] = ip->dst;
		__u16 off = bpf_ntohs(ip->frag_off);
		p->frag_id = bpf_ntohs(ip->id);
		p->salt = p->frag_id << 16 | len;
		if (off & 0x1fff)
			p->frag = FRAG_LATER;
		else if (off & 0x2000)
			p->frag = FRAG_FIRST;
		l4 = l3 + (ip->vhl & 0xf) * 4;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		const struct ip6_hdr *ip6 = at(s, l3, buf, sizeof(*ip6));
		if (!ip6 || (*(const __u8 *)ip6 >> 4) != 6)
			return;
		len = bpf_ntohs(ip6->plen) + 40;
		nexthdr = ip6->next;
		__builtin_memcpy(key->src, ip6->src, 16);
		__builtin_memcpy(key->dst, ip6->dst, 16);
		p->salt = len;
		l4 = l3 + 40;
		// Extension headers: hop-by-hop, routing, fragment, destination
		// options, AH; a bounded walk.
#pragma unroll
		for (int i = 0; i < 6; i++) {
			if (nexthdr != 0 && nexthdr != 43 && nexthdr != 44 && nexthdr != 60 && nexthdr != 51)
				break;
			const struct ext_hdr *ext = at(s, l4, buf, sizeof(*ext));
			if (!ext)
				return;
			if (nexthdr == 44) { // fragment: offset and M in bytes 2-3, ID in 4-7
				__u16 off = bpf_ntohs(ext->frag_off);
				p->frag_id = bpf_ntohl(ext->id);
				if (off & 0xfff8)
					p->frag = FRAG_LATER;
				else if (off & 1)
					p->frag = FRAG_FIRST;
				nexthdr = ext->next;
				l4 += 8;
			} else if (nexthdr == 51) { // AH: (len+2)*4
				nexthdr = ext->next;
				l4 += ((__u32)ext->len + 2) * 4;
			} else {
				nexthdr = ext->next;
				l4 += ((__u32)ext->len + 1) * 8;
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
		const struct tcp_hdr *tcp = at(s, l4, buf, sizeof(*tcp));
		if (!tcp) {
			p->len = 0; // cut inside the transport header: not keyed, as in user space
			return;
		}
		key->sport = bpf_ntohs(tcp->sport);
		key->dport = bpf_ntohs(tcp->dport);
		p->flags = tcp->flags;
		if (sampling > 1) { // a constant: the verifier drops this when sampling is off
			p->salt ^= bpf_ntohl(tcp->seq);                // sequence number
			p->salt ^= bpf_ntohl(tcp->ack) * 0x9e3779b1;   // ack
		}
		if ((tcp->flags & 0x12) == 0x02)
			p->role = ROLE_INITIATOR;
		else if ((tcp->flags & 0x12) == 0x12)
			p->role = ROLE_RESPONDER;
		break;
	}
	case IPPROTO_UDP:
	case 132: { // SCTP: ports in the same place
		const struct ports_hdr *ph = at(s, l4, buf, sizeof(*ph));
		if (!ph) {
			p->len = 0; // cut inside the transport header: not keyed, as in user space
			return;
		}
		key->sport = bpf_ntohs(ph->sport);
		key->dport = bpf_ntohs(ph->dport);
		if (sampling > 1)
			p->salt ^= bpf_ntohl(ph->rest); // UDP length, checksum; SCTP tag
		break;
	}
	case IPPROTO_ICMP:
	case 58: { // ICMPv6
		const struct icmp_hdr *ic = at(s, l4, buf, sizeof(*ic));
		if (!ic) {
			p->len = 0; // cut inside the transport header: not keyed, as in user space
			return;
		}
		__u8 type = ic->type;
		if (sampling > 1)
			p->salt ^= (__u32)bpf_ntohs(ic->check) << 16 | bpf_ntohs(ic->seq); // checksum, sequence
		// As weir's packet decoder: a reply is keyed by its request's type,
		// so both directions are one flow; requests mark the initiator.
		if (nexthdr == IPPROTO_ICMP) {
			if (type == 8 || type == 13 || type == 15 || type == 17) {
				p->role = ROLE_INITIATOR;
			} else if (type == 0 || type == 14 || type == 16 || type == 18) {
				p->role = ROLE_RESPONDER;
				type = type == 0 ? 8 : type - 1;
			}
		} else if (type == 128 || type == 139) {
			p->role = ROLE_INITIATOR;
		} else if (type == 129 || type == 140) {
			p->role = ROLE_RESPONDER;
			type--;
		}
		key->icmp_type = type;
		key->icmp_code = ic->code;
		break;
	}
	}
}
