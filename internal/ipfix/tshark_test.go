package ipfix

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source/pcap"
)

// udp4 wraps payload in IPv4 and UDP headers, 127.0.0.1 → 127.0.0.1:port
// (the packets are only written to a file, never sent).
func udp4(payload []byte, port uint16) []byte {
	b := make([]byte, 28, 28+len(payload))
	b[0], b[8], b[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(b[2:], uint16(28+len(payload)))
	copy(b[12:], []byte{127, 0, 0, 1, 127, 0, 0, 1})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(b[10:], ^uint16(sum))
	binary.BigEndian.PutUint16(b[20:], 50000)
	binary.BigEndian.PutUint16(b[22:], port)
	binary.BigEndian.PutUint16(b[24:], uint16(8+len(payload))) // checksum 0: none (IPv4)
	return append(b, payload...)
}

// TestTshark: Wireshark's IPFIX dissector (cflow) reads weir's messages:
// every record's addresses, ports, protocol, forward counters, times, end
// reason, VLAN and interface name equal the record's, the reverse
// counters are present as RFC 5103 reverse elements, and records with
// drops carry their dropped octets and packets and a forwardingStatus of
// status Drop with the reason's RFC 7270 code.
func TestTshark(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tshark not installed; run scripts/deps.sh: CI must not skip the independent cross-check")
		}
		t.Skip("tshark not installed; run scripts/deps.sh")
	}
	const port = 4739
	var file bytes.Buffer
	w, err := pcap.NewWriter(&file, packet.LinkRaw, 65535)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	e, _ := NewEncoder(Config{Domain: 7, Now: func() time.Time { return ts }}, func(m []byte) error {
		p := udp4(m, port)
		return w.WritePacket(ts.UnixNano(), len(p), p)
	})
	r := rand.New(rand.NewPCG(11, 12))
	const n = 300
	recs := make([]flow.Record, n)
	for i := range recs {
		recs[i] = randRecord(r, i)
		withDrops(&recs[i], i)
		if i%50 == 0 {
			recs[i].Iface = "veth-" + strconv.Itoa(i)
		}
		if err := e.Add(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ipfix.pcap")
	if err := os.WriteFile(path, file.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	fields := []string{"cflow.srcaddr", "cflow.srcaddrv6", "cflow.dstaddr", "cflow.dstaddrv6", "cflow.srcport",
		"cflow.dstport", "cflow.protocol", "cflow.octets", "cflow.packets", "cflow.abstimestart", "cflow.abstimeend",
		"cflow.flow_end_reason", "cflow.vlanid", "cflow.if_name", "cflow.sequence", "cflow.od_id",
		"cflow.drop_octets", "cflow.drop_packets", "cflow.forwarding_status", "cflow.forwarding_status_drop_code"}
	args := []string{"-n", "-r", path, "-d", "udp.port==" + strconv.Itoa(port) + ",cflow", "-T", "fields",
		"-E", "separator=|", "-E", "occurrence=a", "-E", "aggregator=;"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command(tshark, args...)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	// One line per message; each field lists its values over the message's
	// records in order (";"). Octets and packets carry the forward and
	// the reverse counters both (RFC 5103 elements reuse the names).
	var got [][]string // per record: the fields above
	var starts, ends []string
	seqWant := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		cols := strings.Split(line, "|")
		if len(cols) != len(fields) {
			t.Fatalf("tshark line %q", line)
		}
		if cols[14] != strconv.Itoa(seqWant) || cols[15] != "7" {
			t.Errorf("message sequence %s domain %s, want %d and 7", cols[14], cols[15], seqWant)
		}
		per := make([][]string, len(fields))
		for i, c := range cols {
			if c != "" {
				per[i] = strings.Split(c, ";")
			}
		}
		nrec := len(per[6]) // protocol: one per record
		v4, v6, nd := 0, 0, 0
		for k := range nrec {
			if w := &recs[len(got)]; w.DropPackets > 0 { // the drop fields list the records with drops
				want := []string{strconv.FormatUint(w.DropBytes, 10), strconv.FormatUint(w.DropPackets, 10), "2",
					strconv.Itoa(int(dropStatus(w.DropReason) & 0x3f))}
				for j, v := range want {
					if nd >= len(per[16+j]) || per[16+j][nd] != v {
						t.Fatalf("record %d: tshark %s %v, weir %s", len(got), fields[16+j], per[16+j], v)
					}
				}
				nd++
			}
			rec := make([]string, 14)
			if recs[len(got)].Key.IPVersion == 6 {
				rec[0], rec[2] = per[1][v6], per[3][v6]
				v6++
			} else {
				rec[0], rec[2] = per[0][v4], per[2][v4]
				v4++
			}
			rec[4], rec[5], rec[6] = per[4][k], per[5][k], per[6][k]
			rec[7], rec[8] = per[7][2*k], per[8][2*k] // forward; [2k+1] is the reverse
			rec[9], rec[10] = strings.Join(per[7][2*k+1:2*k+2], ""), strings.Join(per[8][2*k+1:2*k+2], "")
			rec[11], rec[12], rec[13] = per[11][k], per[12][k], per[13][k]
			starts, ends = append(starts, per[9][k]), append(ends, per[10][k])
			got = append(got, rec)
		}
		if len(per[16]) != nd {
			t.Errorf("tshark found %d records with drops in a message, weir sent %d", len(per[16]), nd)
		}
		seqWant += nrec
	}
	if len(got) != n {
		t.Fatalf("tshark decoded %d records, want %d", len(got), n)
	}
	for i := range recs { // flowStart/EndMilliseconds, as tshark prints them in UTC
		for k, c := range []struct {
			text string
			ns   int64
		}{{starts[i], recs[i].Start}, {ends[i], recs[i].End}} {
			ts, err := time.Parse("Jan _2, 2006 15:04:05.000000000 MST", c.text)
			if err != nil || ts.UnixMilli() != c.ns/int64(time.Millisecond) {
				t.Fatalf("record %d time %d: tshark %q (%v), weir %v", i, k, c.text, err, time.Unix(0, c.ns).UTC())
			}
		}
	}
	for i, g := range got {
		w := &recs[i]
		src, dst := netip.AddrFrom16(w.Key.SrcAddr), netip.AddrFrom16(w.Key.DstAddr)
		if w.Key.IPVersion == 4 {
			src, dst = src.Unmap(), dst.Unmap()
		}
		reason := map[flow.EndReason]string{flow.ReasonIdle: "1", flow.ReasonActive: "2", flow.ReasonEnd: "3",
			flow.ReasonFull: "5", flow.ReasonEOF: "4", flow.ReasonShutdown: "4"}[w.EndReason]
		name := w.Iface
		if len(name) > 254 {
			name = strings.TrimRight(name[:254], "\x00")
		}
		want := []string{src.String(), "", dst.String(), "", strconv.Itoa(int(w.Key.SrcPort)), strconv.Itoa(int(w.Key.DstPort)),
			strconv.Itoa(int(w.Key.Proto)), strconv.FormatUint(w.Bytes, 10), strconv.FormatUint(w.Packets, 10),
			strconv.FormatUint(w.RevBytes, 10), strconv.FormatUint(w.RevPackets, 10), reason, strconv.Itoa(int(w.VLAN)), name}
		for k := range want {
			if k == 1 || k == 3 {
				continue
			}
			if g[k] != want[k] {
				t.Fatalf("record %d field %d: tshark %q, weir %q", i, k, g[k], want[k])
			}
		}
	}
}

// TestTsharkSampling: Wireshark reads the sampling of weir's records: each
// sampling options record has selectorId equal to its samplingInterval
// and selectorAlgorithm 4, and each sampled record (only those) carries
// the selectorId of its interval, announced in that message or before.
func TestTsharkSampling(t *testing.T) {
	tshark := needTshark(t)
	const port = 4739
	recs, path := encodePcap(t, 3, 29, 500, port, nil)
	fields := []string{"cflow.protocol", "cflow.sampling_interval", "cflow.selector_algorithm", "cflow.selector_id"}
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
	// One line per message; the options records come first in a message,
	// so the first selectorIds are theirs, the rest the sampled records'.
	split := func(c string) []string {
		if c == "" {
			return nil
		}
		return strings.Split(c, ";")
	}
	announced := map[string]bool{}
	next, opts := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		cols := strings.Split(line, "|")
		if len(cols) != len(fields) {
			t.Fatalf("tshark line %q", line)
		}
		protos, intervals, algs, ids := split(cols[0]), split(cols[1]), split(cols[2]), split(cols[3])
		if len(algs) != len(intervals) || len(ids) < len(intervals) {
			t.Fatalf("options records: intervals %v, algorithms %v, selectors %v", intervals, algs, ids)
		}
		for k, n := range intervals {
			if ids[k] != n || algs[k] != "4" {
				t.Fatalf("options record: selectorId %s, algorithm %s, samplingInterval %s", ids[k], algs[k], n)
			}
			announced[n] = true
		}
		opts += len(intervals)
		ids = ids[len(intervals):]
		for range protos {
			w := &recs[next]
			next++
			if w.Sampling <= 1 {
				continue
			}
			n := strconv.Itoa(int(w.Sampling))
			if len(ids) == 0 || ids[0] != n || !announced[n] {
				t.Fatalf("record %d (1 in %s): tshark selectorIds %v, announced %v", next-1, n, ids, announced)
			}
			ids = ids[1:]
		}
		if len(ids) != 0 {
			t.Fatalf("selectorIds %v left over: records without sampling carry one", ids)
		}
	}
	if next != len(recs) || opts < 4 {
		t.Fatalf("tshark decoded %d records of %d, %d options records", next, len(recs), opts)
	}
}

// TestTsharkNAT: Wireshark reads the NAT and deny templates: each
// translated record (only those) carries its post-NAT addresses
// (postNAT…IPv4Address or …IPv6Address, by family) and ports, each denied
// record (only those) firewallEvent 3, "Flow denied".
func TestTsharkNAT(t *testing.T) {
	tshark := needTshark(t)
	const port = 4739
	recs, path := encodePcap(t, 4, 49, 2000, port, withNAT)
	fields := []string{"cflow.protocol", "cflow.post_natsource_ipv4_address", "cflow.post_natdestination_ipv4_address",
		"cflow.post_nat_source_ipv6_address", "cflow.post_nat_destination_ipv6_address",
		"cflow.post_naptsource_transport_port", "cflow.post_naptdestination_transport_port", "cflow.firewall_event"}
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
	next, nat, deny := 0, 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		cols := strings.Split(line, "|")
		if len(cols) != len(fields) {
			t.Fatalf("tshark line %q", line)
		}
		per := make([][]string, len(fields))
		for i, c := range cols {
			if c != "" {
				per[i] = strings.Split(c, ";")
			}
		}
		// take pops the next value of field i, "" when there is none.
		take := func(i int) string {
			if len(per[i]) == 0 {
				return ""
			}
			v := per[i][0]
			per[i] = per[i][1:]
			return v
		}
		for range per[0] {
			w := &recs[next]
			if w.NATed() {
				nat++
				sa, da := 1, 2
				src, dst := netip.AddrFrom16(w.PostNAT.SrcAddr).Unmap(), netip.AddrFrom16(w.PostNAT.DstAddr).Unmap()
				if w.Key.IPVersion == 6 {
					sa, da = 3, 4
				}
				got := []string{take(sa), take(da), take(5), take(6)}
				want := []string{src.String(), dst.String(), strconv.Itoa(int(w.PostNAT.SrcPort)), strconv.Itoa(int(w.PostNAT.DstPort))}
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Fatalf("record %d: tshark post-NAT %v, weir %v", next, got, want)
				}
			}
			if w.Verdict == flow.VerdictDeny {
				deny++
				if v := take(7); v != "3" {
					t.Fatalf("record %d: tshark firewallEvent %q, want 3 (flow denied)", next, v)
				}
			}
			next++
		}
		for i := 1; i < len(per); i++ {
			if len(per[i]) != 0 {
				t.Fatalf("%s %v left over: records without NAT or verdict carry them", fields[i], per[i])
			}
		}
	}
	if next != len(recs) || nat < 400 || deny < 100 {
		t.Fatalf("tshark decoded %d records of %d; %d translated, %d denied", next, len(recs), nat, deny)
	}
}

// needTshark returns tshark's path, skipping the test without it (failing
// it in CI, which must not skip the independent cross-check).
func needTshark(t *testing.T) string {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tshark not installed; run scripts/deps.sh: CI must not skip the independent cross-check")
		}
		t.Skip("tshark not installed; run scripts/deps.sh")
	}
	return tshark
}

// encodePcap encodes n random records (seeded by seed, seed+1), with
// drops, sampling and what more adds, into IPFIX messages to UDP port,
// templates refreshed every refresh messages, and writes them as a pcap
// for tshark; it returns the records and the file's path.
func encodePcap(t *testing.T, refresh int, seed uint64, n int, port uint16, more func(*flow.Record, int)) ([]flow.Record, string) {
	t.Helper()
	return encodePcapPEN(t, 0, refresh, seed, n, port, more)
}

// encodePcapPEN is encodePcap from an Encoder with enterprise number pen.
func encodePcapPEN(t *testing.T, pen uint32, refresh int, seed uint64, n int, port uint16, more func(*flow.Record, int)) ([]flow.Record, string) {
	t.Helper()
	var file bytes.Buffer
	w, err := pcap.NewWriter(&file, packet.LinkRaw, 65535)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	e, _ := NewEncoder(Config{Domain: 7, RefreshMessages: refresh, PEN: pen, Now: func() time.Time { return ts }}, func(m []byte) error {
		p := udp4(m, port)
		return w.WritePacket(ts.UnixNano(), len(p), p)
	})
	r := rand.New(rand.NewPCG(seed, seed+1))
	recs := make([]flow.Record, n)
	for i := range recs {
		recs[i] = randRecord(r, i)
		withDrops(&recs[i], i)
		withSampling(&recs[i], i)
		if more != nil {
			more(&recs[i], i)
		}
		if err := e.Add(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ipfix.pcap")
	if err := os.WriteFile(path, file.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return recs, path
}
