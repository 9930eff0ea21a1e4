package main

import (
	"strings"
	"testing"
)

func TestServicesExplain(t *testing.T) {
	code, out, errs := runCLI("services", "explain", "--stress", "4,12", "42.0.5.1:8080")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"VIP 42.0.5.1:8080: 7 rows",
		"ls_in_lb", "ct_lb_mark(backends=42.0.5.2:8081)", "(switch, 4): ls0 ls1 ls2 ls3",
		"lr_out_undnat", "ip4.src == 42.0.5.2 && tcp.src == 8081", "(router, 4): lr0 lr1 lr2 lr3",
		"arp.tpa == $lb_vips_v4_", "(12 addresses)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	if code, _, errs = runCLI("services", "explain", "--stress", "2,3", "10.9.9.9"); code != exitFailure || !strings.Contains(errs, "no load balancer") {
		t.Errorf("unknown VIP: exit %d %q", code, errs)
	}
	if code, _, _ = runCLI("services", "explain", "42.0.0.1"); code != exitUsage {
		t.Errorf("no model: exit %d", code)
	}
}
