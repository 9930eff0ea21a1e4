// Package nfnetlink opens the netfilter netlink sockets that weir's
// conntrack and NFLOG sources read (NETLINK_NETFILTER), in a chosen
// network namespace. Linux only; elsewhere it is empty.
package nfnetlink
