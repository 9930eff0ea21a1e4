package agent

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/weir-dev/weir/internal/caps"
	"github.com/weir-dev/weir/internal/source/conntrack"
	"github.com/weir-dev/weir/internal/source/nflog"
)

// Netfilter is the conntrack source (when Conntrack is set) with the
// NFLOG groups (when NFLOG has any), or the NFLOG source alone.
type Netfilter struct {
	Conntrack *conntrack.SourceConfig
	NFLOG     *nflog.SourceConfig
	Netns     string // the one namespace they read ("": weir's own)
}

// Open opens the sources as one producer; a permission error says what
// is needed.
func (n Netfilter) Open() (Producer, error) {
	var ps []Producer
	if n.Conntrack != nil {
		ct, err := conntrack.New(*n.Conntrack)
		if err != nil {
			return nil, ctPrivilege(err)
		}
		ps = append(ps, ct)
	}
	if n.NFLOG != nil && len(n.NFLOG.Groups) > 0 {
		nl, err := nflog.New(*n.NFLOG)
		if err != nil {
			All(ps...).Close()
			if errors.Is(err, syscall.EBUSY) {
				return nil, fmt.Errorf("%w (another program reads that NFLOG group: ulogd, another weir?)", err)
			}
			return nil, ctPrivilege(err)
		}
		ps = append(ps, nl)
	}
	return All(ps...), nil
}

// Keep is what the sources still need once open, and why: conntrack
// CAP_NET_ADMIN (the kernel checks every dump request), NFLOG nothing
// (its groups are bound), a namespace CAP_SYS_ADMIN to enter it again.
func (n Netfilter) Keep() (caps.Set, string) {
	var keep caps.Set
	why := "nothing more is opened"
	if n.Conntrack != nil {
		keep, why = caps.Of(caps.NetAdmin), "the kernel checks every conntrack dump request"
	}
	if n.Netns != "" {
		keep |= caps.Of(caps.SysAdmin)
		why += "; cap_sys_admin to enter namespace " + n.Netns + " again"
	}
	return keep, why
}

// ctPrivilege explains a permission error.
func ctPrivilege(err error) error {
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("%w\nreading conntrack and NFLOG needs root or CAP_NET_ADMIN", err)
	}
	return err
}
