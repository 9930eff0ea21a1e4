package runner

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/weir-dev/weir/internal/testhost"
)

// Options are the options of 'weir bench run' given as text.
type Options struct {
	Hub      string   // bridge or router
	Offloads string   // on or off
	Observe  string   // comma-separated Modes
	Sets     []string // name=value for a uperf $name
}

// Apply checks o and sets cfg's Hub, Offloads and Observe (with Strict
// checked against it). It returns the lookup of a profile's $names: --set
// first, then the environment. Errors name the flag.
func (o Options) Apply(cfg *Config) (func(string) (string, bool), error) {
	switch o.Hub {
	case "bridge":
		cfg.Hub = testhost.Bridge
	case "router":
		cfg.Hub = testhost.Router
	default:
		return nil, fmt.Errorf("--hub %q: want bridge or router", o.Hub)
	}
	switch o.Offloads {
	case "on":
		cfg.Offloads = true
	case "off":
	default:
		return nil, fmt.Errorf("--offloads %q: want on or off", o.Offloads)
	}
	if o.Observe != "" {
		for _, m := range strings.Split(o.Observe, ",") {
			if !slices.Contains(Modes, m) {
				return nil, fmt.Errorf("--observe %q: want %s", m, strings.Join(Modes, ", "))
			}
			cfg.Observe = append(cfg.Observe, m)
		}
	}
	if cfg.Strict && len(cfg.Observe) == 0 {
		return nil, fmt.Errorf("--strict needs --observe")
	}
	vars := map[string]string{}
	for _, s := range o.Sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--set %q: want name=value", s)
		}
		vars[k] = v
	}
	return func(k string) (string, bool) {
		if v, ok := vars[k]; ok {
			return v, true
		}
		return os.LookupEnv(k)
	}, nil
}
