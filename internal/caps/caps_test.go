package caps

import "testing"

func TestSetString(t *testing.T) {
	for _, c := range []struct {
		s    Set
		want string
	}{
		{0, "none"},
		{Of(NetRaw), "cap_net_raw"},
		{Of(NetAdmin, NetRaw, BPF), "cap_net_admin,cap_net_raw,cap_bpf"},
		{Of(Cap(63)), "cap_63"},
	} {
		if got := c.s.String(); got != c.want {
			t.Errorf("%#x: %q, want %q", uint64(c.s), got, c.want)
		}
	}
	if !Of(Perfmon).Has(Perfmon) || Of(Perfmon).Has(BPF) || Set(^uint64(0)).Has(Cap(64)) {
		t.Error("Has is wrong")
	}
}
