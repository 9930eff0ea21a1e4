package conntrack

import (
	"os"
	"regexp"
	"testing"
)

// TestMetricsDocumented: every weir_conntrack_* metric is in
// docs/metrics.md with its type, and the page documents no other.
func TestMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(weir_conntrack_[a-z_]+)` \\| (counter|gauge|histogram) \\|").FindAllStringSubmatch(string(doc), -1) {
		rows[m[1]] = m[2]
	}
	for _, d := range Collector(func() SourceStats { return SourceStats{} }, 1).Describe() {
		typ := d.Type.String()
		if got, ok := rows[d.Name]; !ok {
			t.Errorf("%s (%s) is not documented in docs/metrics.md", d.Name, typ)
		} else if got != typ {
			t.Errorf("docs/metrics.md says %s is a %s; it is a %s", d.Name, got, typ)
		}
		delete(rows, d.Name)
	}
	for name := range rows {
		t.Errorf("docs/metrics.md documents %s, which the conntrack source does not register", name)
	}
}
