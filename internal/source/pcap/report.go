package pcap

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/weir-dev/weir/internal/format"
)

// WriteStats writes the --stats line of what was read.
func (m *Files) WriteStats(w io.Writer) {
	s := m.Stats()
	comp := ""
	if s.Compression != "" {
		comp = ", last " + s.Compression + "-compressed"
	}
	fmt.Fprintf(w, "input       %s files (last %s%s): %s packets, %s read\n", format.Count(s.Files), s.Format, comp,
		format.Count(s.Packets), format.Bytes(s.Bytes))
}

// Warning says which inputs were out of time order ("" if none).
func (m *Files) Warning() string {
	late := m.OutOfOrder()
	if len(late) == 0 {
		return ""
	}
	q := make([]string, len(late))
	for i, n := range late {
		q[i] = strconv.Quote(n) // names for a terminal: control bytes escaped
	}
	return strings.Join(q, ", ") + " start before the previous file ended: give rotated captures in time order, or flows are cut short"
}
