package synthetic

import (
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	cfg, err := ParseSpec("flows=2e3, packets=1e6,ipv6=0.25,udp=0,seed=7,min-payload=10,max-payload=20")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Flows != 2000 || cfg.Packets != 1000000 || cfg.IPv6Share != 0.25 || cfg.UDPShare != 0 ||
		cfg.Seed != 7 || cfg.MinPayload != 10 || cfg.MaxPayload != 20 || cfg.StepNs != 1000 {
		t.Errorf("parsed %+v", cfg)
	}
	if d, _ := ParseSpec("seed=3"); d.Flows != 1000 || d.Packets != 100000 || d.MaxPayload != 1400 {
		t.Errorf("defaults not kept: %+v", d)
	}
	for spec, want := range map[string]string{
		"flows":       `"flows" is not key=value`,
		"flows=1.5":   `flows: "1.5" is not an integer`,
		"ipv6=x":      "ipv6: ",
		"colour=blue": `unknown key "colour"`,
	} {
		if _, err := ParseSpec(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSpec(%q) = %v, want %q", spec, err, want)
		}
	}
}
