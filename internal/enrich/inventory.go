// Package enrich labels flow records with who and what they belong to:
// the workload at each end (IP or CIDR → name, namespace, node) and the
// service a flow reached (VIP:port → load balancer, its backends and
// group), from an Inventory loaded from a file, set through the API, or
// fed by a Kubernetes watch (internal/enrich/kube).
//
// Lookups read an immutable index swapped in atomically when the
// inventory changes, so enriching a record takes no lock and allocates
// nothing.
package enrich

import (
	"net/netip"

	"github.com/weir-dev/weir/internal/enrich/services"
)

// Inventory is the whole model enrichment works from: the service model
// (nodes, load balancers, groups) and the workloads.
type Inventory struct {
	Nodes     []services.Node
	LBs       []services.LB
	Groups    []services.Group
	Workloads []Workload
}

// Workload is one workload (pod, VM, host) and the addresses it owns.
type Workload struct {
	Name      string
	Namespace string
	Node      string
	Kind      string            // "pod", "vm", "host", … free text
	Labels    map[string]string // not carried into records
	// Addrs are the workload's addresses: a host prefix (/32, /128) for
	// one address, or a wider prefix for a range (the longest match wins).
	Addrs []netip.Prefix
}
