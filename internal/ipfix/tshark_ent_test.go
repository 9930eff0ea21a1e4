package ipfix

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// TestTsharkEnterprise: Wireshark's IPFIX dissector reads the messages of
// an Encoder with a PEN, enriched records (every subset withEnt makes,
// with drops, sampling, NAT and deny) among plain ones, with no expert
// warning and no malformed packet: it finds every record, and as
// "Enterprise Private entry" of that PEN every enriched record's service
// match, mark and zone and each of its strings that is not empty (it
// shows no empty one), in order, and nothing on records without
// enrichment.
func TestTsharkEnterprise(t *testing.T) {
	tshark := needTshark(t)
	const port = 4739
	recs, path := encodePcapPEN(t, testPEN, 4, 73, 2000, port, func(r *flow.Record, i int) { withNAT(r, i); withEnt(r, i) })
	fields := []string{"cflow.protocol", "cflow.enterprise_private_entry", "_ws.expert", "_ws.malformed"}
	args := []string{"-n", "-r", path, "-d", "udp.port==" + strconv.Itoa(port) + ",cflow", "-T", "fields",
		"-E", "separator=|", "-E", "occurrence=a", "-E", "aggregator=;"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(tshark, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	var nrec int
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		cols := strings.Split(line, "|")
		if len(cols) != len(fields) {
			t.Fatalf("tshark line %q", line)
		}
		if cols[2] != "" || cols[3] != "" {
			t.Fatalf("tshark: expert info %q, malformed %q", cols[2], cols[3])
		}
		if cols[0] != "" {
			nrec += len(strings.Split(cols[0], ";"))
		}
		if cols[1] != "" {
			got = append(got, strings.Split(cols[1], ";")...)
		}
	}
	var want []string
	var nent int
	for i := range recs {
		r := &recs[i]
		if !enriched(r) {
			continue
		}
		nent++
		want = append(want, hex.EncodeToString([]byte{byte(r.ServiceMatch)}),
			hex.EncodeToString(binary.BigEndian.AppendUint32(nil, r.Mark)),
			hex.EncodeToString(binary.BigEndian.AppendUint16(nil, r.Zone)))
		var s [entStrings]string
		loadStrings(&s, r)
		for _, v := range s {
			if v != "" {
				want = append(want, hex.EncodeToString([]byte(v)))
			}
		}
	}
	if nrec != len(recs) || nent < len(recs)/2 {
		t.Fatalf("tshark found %d records of %d (%d enriched)", nrec, len(recs), nent)
	}
	if len(got) != len(want) {
		t.Fatalf("tshark found %d enterprise entries, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("enterprise entry %d: tshark %s, want %s", i, got[i], want[i])
		}
	}
}
