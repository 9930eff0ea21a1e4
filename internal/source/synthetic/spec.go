package synthetic

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseSpec parses the --synthetic spec, comma-separated key=value pairs
// ("flows=1000,packets=1e6,ipv6=0.5,udp=0.3,seed=7"), over the defaults
// weir capture uses. Counts may be written in float notation (1e6).
func ParseSpec(spec string) (Config, error) {
	cfg := Config{Flows: 1000, Packets: 100000, IPv6Share: 0.5, UDPShare: 0.5,
		MinPayload: 0, MaxPayload: 1400, Seed: 1, Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), StepNs: 1000}
	ints := map[string]*int{"flows": &cfg.Flows, "packets": &cfg.Packets, "min-payload": &cfg.MinPayload, "max-payload": &cfg.MaxPayload}
	floats := map[string]*float64{"ipv6": &cfg.IPv6Share, "udp": &cfg.UDPShare}
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return cfg, fmt.Errorf("%q is not key=value", kv)
		}
		var err error
		switch {
		case ints[k] != nil:
			*ints[k], err = atoi(v)
		case floats[k] != nil:
			*floats[k], err = strconv.ParseFloat(v, 64)
		case k == "seed":
			var n int
			n, err = atoi(v)
			cfg.Seed = int64(n)
		default:
			return cfg, fmt.Errorf("unknown key %q (flows, packets, ipv6, udp, seed, min-payload, max-payload)", k)
		}
		if err != nil {
			return cfg, fmt.Errorf("%s: %v", k, err)
		}
	}
	return cfg, nil
}

// atoi accepts plain integers and float notation such as 1e6.
func atoi(s string) (int, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != float64(int(f)) {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	return int(f), nil
}
