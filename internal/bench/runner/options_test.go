package runner

import (
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/testhost"
)

func TestOptionsApply(t *testing.T) {
	t.Setenv("WEIR_TEST_NTHR", "from-env")
	t.Setenv("WEIR_TEST_SIZE", "env-size")
	var cfg Config
	lookup, err := Options{Hub: "router", Offloads: "off", Observe: "afpacket,conntrack", Sets: []string{"WEIR_TEST_SIZE=16k", "x=a=b"}}.Apply(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Hub != testhost.Router || cfg.Offloads || strings.Join(cfg.Observe, ",") != "afpacket,conntrack" {
		t.Errorf("config %+v", cfg)
	}
	for k, want := range map[string]string{"WEIR_TEST_SIZE": "16k", "WEIR_TEST_NTHR": "from-env", "x": "a=b"} {
		if v, ok := lookup(k); !ok || v != want {
			t.Errorf("$%s = %q %v, want %q (--set before the environment)", k, v, ok, want)
		}
	}
	if _, ok := lookup("WEIR_TEST_UNSET_NAME"); ok {
		t.Error("an unset name was found")
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Hub: "switch", Offloads: "on"}, "--hub"},
		{Options{Hub: "bridge", Offloads: "maybe"}, "--offloads"},
		{Options{Hub: "bridge", Offloads: "on", Observe: "afpacket,pcap"}, `--observe "pcap"`},
		{Options{Hub: "bridge", Offloads: "on", Sets: []string{"=1"}}, "--set"},
	} {
		if _, err := c.o.Apply(&Config{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.o, err, c.want)
		}
	}
	if _, err := (Options{Hub: "bridge", Offloads: "on"}).Apply(&Config{Strict: true}); err == nil || !strings.Contains(err.Error(), "--strict needs --observe") {
		t.Errorf("--strict alone: %v", err)
	}
}
