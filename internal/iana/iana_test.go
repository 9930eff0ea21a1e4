package iana

import (
	"strconv"
	"testing"
)

func TestLookup(t *testing.T) {
	if s, ok := LookupService("https"); !ok || s.Port != 443 || s.Protos != TCP|UDP {
		t.Errorf("https = %+v %v", s, ok)
	}
	if s, ok := LookupService("ssh"); !ok || s.Port != 22 || s.Protos != TCP {
		t.Errorf("ssh = %+v %v", s, ok)
	}
	if _, ok := LookupService("nosuch"); ok {
		t.Error("nosuch found")
	}
	for name, want := range map[string]uint8{"tcp": 6, "udp": 17, "icmpv6": 58, "icmp6": 58, "ipv6-icmp": 58, "gre": 47} {
		if n, ok := LookupProto(name); !ok || n != want {
			t.Errorf("%s = %d %v, want %d", name, n, ok, want)
		}
	}
}

func TestProtoName(t *testing.T) {
	for n := 0; n < 256; n++ {
		got := ProtoName(uint8(n))
		if s, ok := protoShort[uint8(n)]; ok {
			if got != s {
				t.Errorf("%d: %q", n, got)
			}
			if back, ok := LookupProto(got); !ok || back != uint8(n) {
				t.Errorf("%q does not look up to %d", got, n)
			}
		} else if got != strconv.Itoa(n) {
			t.Errorf("%d: %q", n, got)
		}
	}
}
