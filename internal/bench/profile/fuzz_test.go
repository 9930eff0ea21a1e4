package profile

import (
	"os"
	"path/filepath"
	"testing"
)

func seeds(f *testing.F, ext string) {
	files, _ := filepath.Glob("../../../examples/bench/*" + ext)
	more, _ := filepath.Glob("testdata/*" + ext)
	for _, p := range append(files, more...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
}

// FuzzParseYAML: any input gives a profile or an error, never a panic; a
// profile it gives is valid and validates again unchanged.
func FuzzParseYAML(f *testing.F) {
	seeds(f, ".yaml")
	f.Add([]byte("name: x\ngroups: [{nthreads: 1, transactions: [{iterations: 1, flowops: [{op: connect}]}]}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseYAML(data, "fuzz.yaml")
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted, then invalid: %v", err)
		}
	})
}

// FuzzParseUperfXML: as FuzzParseYAML, with every $variable set.
func FuzzParseUperfXML(f *testing.F) {
	seeds(f, ".xml")
	f.Add([]byte(`<profile name="x"><group nthreads="1"><transaction iterations="1"><flowop type=connect options="protocol=udp"/><flowop type=write options="size=$s"/></transaction></group></profile>`))
	v := func(string) (string, bool) { return "8", true }
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseUperfXML(data, "fuzz.xml", v)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted, then invalid: %v", err)
		}
	})
}
