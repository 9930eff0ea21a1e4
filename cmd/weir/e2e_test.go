package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/craft"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/source/pcap"
)

// jsonRecord mirrors the JSON contract in docs/record.md.
type jsonRecord struct {
	SrcIP       string  `json:"src_ip"`
	DstIP       string  `json:"dst_ip"`
	SrcPort     uint16  `json:"src_port"`
	DstPort     uint16  `json:"dst_port"`
	Proto       uint8   `json:"proto"`
	ICMPType    *uint8  `json:"icmp_type"`
	ICMPCode    *uint8  `json:"icmp_code"`
	Packets     uint64  `json:"packets"`
	Bytes       uint64  `json:"bytes"`
	RevPackets  uint64  `json:"rev_packets"`
	RevBytes    uint64  `json:"rev_bytes"`
	TCPFlags    uint8   `json:"tcp_flags"`
	RevTCPFlags uint8   `json:"rev_tcp_flags"`
	Start       string  `json:"start"`
	End         string  `json:"end"`
	EndReason   string  `json:"end_reason"`
	Iface       *string `json:"iface"`
	VLAN        uint16  `json:"vlan"`
	TunnelSrc   string  `json:"tunnel_src"`
	TunnelDst   string  `json:"tunnel_dst"`
}

// key returns the record's flow key (initiator orientation).
func (r *jsonRecord) key(t *testing.T) flow.Key {
	var k flow.Key
	k.SetSrc(netip.MustParseAddr(r.SrcIP))
	k.SetDst(netip.MustParseAddr(r.DstIP))
	k.SrcPort, k.DstPort, k.Proto = r.SrcPort, r.DstPort, r.Proto
	if r.Proto == flow.ProtoICMP || r.Proto == flow.ProtoICMPv6 {
		if r.ICMPType == nil || r.ICMPCode == nil {
			t.Fatalf("ICMP record without icmp_type/icmp_code: %+v", r)
		}
		k.ICMPType, k.ICMPCode = *r.ICMPType, *r.ICMPCode
	} else if r.ICMPType != nil {
		t.Fatalf("non-ICMP record with icmp_type: %+v", r)
	}
	return k
}

// writeScenario writes craft's scenario to a pcapng (or, with classic, one
// pcap per interface is not possible, so classic writes only the Ethernet
// interface's frames) and returns the path and the truth for what it wrote.
func writeScenario(t *testing.T, seed int64, classic bool) (string, []craft.Truth) {
	t.Helper()
	frames, truth := craft.Scenario(seed)
	var buf bytes.Buffer
	path := filepath.Join(t.TempDir(), fmt.Sprintf("scenario-%d.pcapng", seed))
	if classic {
		path = filepath.Join(t.TempDir(), "eth0.pcap")
		w, err := pcap.NewWriter(&buf, craft.ScenarioIfaces[0].Link, 65535)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range frames {
			if f.Iface == craft.ScenarioIfaces[0].Name {
				if err := w.WritePacket(f.Time, f.WireLen, f.Data); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		var kept []craft.Truth
		for _, tr := range truth {
			if tr.Iface == craft.ScenarioIfaces[0].Name {
				kept = append(kept, tr)
			}
		}
		truth = kept
	} else {
		w, err := pcap.NewNgWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]int{}
		for _, ifc := range craft.ScenarioIfaces {
			if ids[ifc.Name], err = w.AddInterface(ifc.Name, ifc.Link, 65535); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range frames {
			if err := w.WritePacket(ids[f.Iface], f.Time, f.WireLen, f.Data); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, truth
}

// captureJSON runs `weir capture --read path -o json` in process.
func captureJSON(t *testing.T, path string, extra ...string) []jsonRecord {
	t.Helper()
	var out, errb bytes.Buffer
	args := append([]string{"capture", "--read", path, "--output=json", "--stats"}, extra...)
	if code := run(args, &out, &errb); code != exitOK {
		t.Fatalf("weir %v: exit %d\n%s", args, code, errb.String())
	}
	var recs []jsonRecord
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r jsonRecord
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("bad JSON line %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

// TestGoldenScenario replays craft's ground-truth scenario through the CLI
// and checks every flow's packets and bytes per direction, TCP flags, end
// reason, interface and time span exactly against what craft generated.
func TestGoldenScenario(t *testing.T) {
	for _, c := range []struct {
		name    string
		seed    int64
		classic bool
	}{{"pcapng-seed1", 1, false}, {"pcapng-seed7", 7, false}, {"pcap-eth0-seed3", 3, true}} {
		t.Run(c.name, func(t *testing.T) {
			path, truth := writeScenario(t, c.seed, c.classic)
			recs := captureJSON(t, path)
			type agg struct {
				jsonRecord
				n, active int
				last      string
			}
			got := map[flow.Key]*agg{}
			for i := range recs {
				r := &recs[i]
				k := r.key(t)
				a := got[k]
				if a == nil {
					a = &agg{jsonRecord: *r}
					a.Packets, a.Bytes, a.RevPackets, a.RevBytes, a.TCPFlags, a.RevTCPFlags = 0, 0, 0, 0, 0, 0
					got[k] = a
				} else if r.Start < a.End {
					t.Errorf("%v: records out of order or overlapping: %s < %s", k, r.Start, a.End)
				}
				a.n++
				if r.EndReason == "active" {
					a.active++
				}
				a.Packets += r.Packets
				a.Bytes += r.Bytes
				a.RevPackets += r.RevPackets
				a.RevBytes += r.RevBytes
				a.TCPFlags |= r.TCPFlags
				a.RevTCPFlags |= r.RevTCPFlags
				a.End, a.last = r.End, r.EndReason
			}
			if len(got) != len(truth) {
				t.Errorf("weir reported %d flows, the scenario has %d", len(got), len(truth))
			}
			for _, tr := range truth {
				a := got[tr.Key]
				if a == nil {
					t.Errorf("flow %v %s:%d -> %s:%d missing", tr.Key.Proto, tr.Key.Src(), tr.Key.SrcPort, tr.Key.Dst(), tr.Key.DstPort)
					continue
				}
				name := fmt.Sprintf("%d %s:%d -> %s:%d", tr.Key.Proto, tr.Key.Src(), tr.Key.SrcPort, tr.Key.Dst(), tr.Key.DstPort)
				if a.Packets != tr.Packets || a.Bytes != tr.Bytes || a.RevPackets != tr.RevPackets || a.RevBytes != tr.RevBytes {
					t.Errorf("%s: got %d/%d packets %d/%d bytes, want %d/%d packets %d/%d bytes", name,
						a.Packets, a.RevPackets, a.Bytes, a.RevBytes, tr.Packets, tr.RevPackets, tr.Bytes, tr.RevBytes)
				}
				if a.TCPFlags != tr.TCPFlags || a.RevTCPFlags != tr.RevTCPFlags {
					t.Errorf("%s: tcp flags %#x/%#x, want %#x/%#x", name, a.TCPFlags, a.RevTCPFlags, tr.TCPFlags, tr.RevTCPFlags)
				}
				if a.last != tr.EndReason.String() {
					t.Errorf("%s: last end_reason %s, want %s", name, a.last, tr.EndReason)
				}
				if (a.active > 0) != tr.ActiveRecords || a.n != a.active+1 {
					t.Errorf("%s: %d records, %d active; scenario expects active records: %v", name, a.n, a.active, tr.ActiveRecords)
				}
				if a.VLAN != tr.VLAN {
					t.Errorf("%s: vlan %d, want %d", name, a.VLAN, tr.VLAN)
				}
				if a.Iface == nil || *a.Iface != tr.Iface {
					t.Errorf("%s: iface %v, want %q", name, a.Iface, tr.Iface)
				}
				wantStart := time.Unix(0, tr.First).UTC().Format("2006-01-02T15:04:05.000000000Z07:00")
				wantEnd := time.Unix(0, tr.Last).UTC().Format("2006-01-02T15:04:05.000000000Z07:00")
				if a.Start != wantStart || a.End != wantEnd {
					t.Errorf("%s: span %s..%s, want %s..%s", name, a.Start, a.End, wantStart, wantEnd)
				}
			}
		})
	}
}
