//go:build linux

package testhost

import (
	"context"
	"errors"
	"fmt"
)

// OpenNet is NewNet for programs (weir bench): it returns errors instead of
// failing a test, and the caller must call Close, also after an error (a
// half-built Net is removed by it); namespaces left behind by a killed
// program are swept by the next Available, as for tests. ctx bounds the
// setup.
func OpenNet(ctx context.Context, kind HubKind, hosts int) (*Net, error) {
	if ok, why := Available(); !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnsupported, why)
	}
	if kind == Bridge && bridgeBin == "" {
		return nil, errors.New("testhost: the bridge command (iproute2) was not found")
	}
	n, err := newNet(kind, hosts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	if err := n.build(ctx, hosts); err != nil {
		return n, fmt.Errorf("testhost: OpenNet: %w", err)
	}
	return n, nil
}

// Close removes every namespace and veth of n (hosts joined from other Nets
// keep their namespace and lose only n's interface). It is for Nets made by
// OpenNet; NewNet's cleanup calls it for tests. A second Close does nothing.
func (n *Net) Close() error {
	if n == nil || n.Hub == nil {
		return nil
	}
	return n.destroy()
}

// newNet checks the arguments and names a Net; nothing is created yet.
func newNet(kind HubKind, hosts int) (*Net, error) {
	if kind != Bridge && kind != Router {
		return nil, fmt.Errorf("unknown hub kind %v", kind)
	}
	if hosts < 0 || hosts > MaxHosts {
		return nil, fmt.Errorf("%d hosts, want 0..%d", hosts, MaxHosts)
	}
	n := &Net{Kind: kind, id: seq.Add(1) - 1, slot: netSeq.Add(1) - 1}
	n.Hub = &Host{Name: n.nsName("hub")}
	n.Hub.path = netnsDir + "/" + n.Hub.Name
	if kind == Bridge {
		n.Hub.Iface = BridgeName
	}
	return n, nil
}

// build creates the hub and the first hosts.
func (n *Net) build(ctx context.Context, hosts int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.createHub(ctx); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	_, err := n.addHosts(ctx, hosts, nil)
	return err
}

// Join gives host h (a host of another Net) a second interface on n, the
// Multus case: a pod with an extra network. It returns a Host for that
// interface: the same namespace (Name) with n's Iface and addresses, so
// traffic to its addresses crosses n, not h's own Net. Only Bridge Nets can
// be joined (a Router would give h a second default route). Close on n
// removes the interface, never h's namespace. The rest is as AddHost.
func (n *Net) Join(ctx context.Context, h *Host) (*Host, error) {
	if n == nil || n.Hub == nil {
		return nil, errors.New("testhost: Join on a Net not made by NewNet or OpenNet")
	}
	if n.Kind != Bridge {
		return nil, errors.New("testhost: Join needs a Bridge Net")
	}
	if h == nil || h.path == "" || h.owner == n {
		return nil, errors.New("testhost: Join: not a host of another Net")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errors.New("testhost: Join after the Net was cleaned up")
	}
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	hs, err := n.addHosts(ctx, 1, h)
	if err != nil {
		return nil, fmt.Errorf("testhost: Join: %w", err)
	}
	return hs[0], nil
}
