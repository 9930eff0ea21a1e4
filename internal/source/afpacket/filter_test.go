package afpacket

import (
	"testing"

	"github.com/weir-dev/weir/internal/netdev"
)

func TestCompileFilter(t *testing.T) {
	if _, err := CompileFilter("tcp port"); err == nil {
		t.Fatal("a bad expression compiled")
	}
	f, err := CompileFilter("tcp port 443")
	if err != nil {
		t.Fatal(err)
	}
	eth, err := f(netdev.Link{Type: 1})
	if err != nil || len(eth) == 0 {
		t.Fatalf("ethernet: %d instructions, %v", len(eth), err)
	}
	raw, err := f(netdev.Link{Type: 65534})
	if err != nil || len(raw) == 0 {
		t.Fatalf("raw IP: %d instructions, %v", len(raw), err)
	}
	if len(raw) == len(eth) && raw[0] == eth[0] {
		t.Error("raw IP links got the Ethernet program")
	}
	again, _ := f(netdev.Link{Type: 1})
	if &again[0] != &eth[0] {
		t.Error("the Ethernet program was compiled twice")
	}
}
