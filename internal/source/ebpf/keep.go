package ebpf

import "github.com/weir-dev/weir/internal/caps"

// Keep is what the source still needs once its programs are loaded: with
// TCX (Linux 6.6+) attaching the loaded programs to new interfaces and
// draining the maps need no capability; older kernels (or Attach tc)
// need CAP_BPF for every bpf() command, CAP_NET_ADMIN for clsact filters
// and, with Drops, CAP_PERFMON for the drop tracepoint; Netns needs
// CAP_SYS_ADMIN to enter the namespaces again.
func (cfg *Config) Keep() caps.Set {
	var k caps.Set
	if !caps.KernelAtLeast(6, 6) || cfg.Attach == AttachTC {
		k |= caps.Of(caps.BPF, caps.NetAdmin)
		if cfg.Drops {
			k |= caps.Of(caps.Perfmon)
		}
	}
	if len(cfg.Netns) > 0 {
		k |= caps.Of(caps.SysAdmin)
	}
	return k
}
