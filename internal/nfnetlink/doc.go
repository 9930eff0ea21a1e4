// Package nfnetlink is what weir's conntrack and NFLOG sources share of
// netfilter netlink (NETLINK_NETFILTER): the wire layout of nlmsghdr,
// nfgenmsg and nlattr, the message and attribute walkers, request headers,
// and (Linux only) opening and reading the socket in a chosen network
// namespace.
package nfnetlink
