package ipfixrecv

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/ipfix"
	"github.com/weir-dev/weir/internal/sink"
	"github.com/weir-dev/weir/internal/store"
)

// hostileRecord is one record of the layout test's template: addresses,
// packets, octets, flowStart/EndMilliseconds (any int64 as unsigned64),
// interfaceName.
type hostileRecord struct {
	start, end int64 // Unix ms
	name       []byte
}

// layoutTemplate is template 300 of the records above.
var layoutTemplate = []uint16{300, 7, 8, 4, 12, 4, 2, 4, 1, 4, 152, 8, 153, 8, 82, 0xffff}

// hostileMsg encodes recs as one IPFIX message (with the template).
func hostileMsg(seq uint32, recs []hostileRecord) []byte {
	be := binary.BigEndian
	b := make([]byte, 16, 1500)
	be.PutUint16(b, ipfix.Version)
	be.PutUint32(b[8:], seq)
	be.PutUint32(b[12:], 1)
	b = be.AppendUint16(b, 2)
	b = be.AppendUint16(b, uint16(4+2*len(layoutTemplate)))
	for _, v := range layoutTemplate {
		b = be.AppendUint16(b, v)
	}
	set := len(b)
	b = append(b, 1, 44, 0, 0) // data set 300
	for i, r := range recs {
		b = append(b, 10, 0, 0, byte(i), 192, 0, 2, 1, 0, 0, 0, 3, 0, 0, 0, 180)
		b = be.AppendUint64(b, uint64(r.start))
		b = be.AppendUint64(b, uint64(r.end))
		b = append(b, 255)
		b = be.AppendUint16(b, uint16(len(r.name)))
		b = append(b, r.name...)
	}
	be.PutUint16(b[set+2:], uint16(len(b)-set))
	be.PutUint16(b[2:], uint16(len(b)))
	return b
}

// TestHostileLayout: exporters sending random interface names (terminal
// escapes, invalid UTF-8, hundreds of distinct ones) and, in 8 records of
// 10, start and end times anywhere from 1677 to 2262, into a collector
// writing to a real store: every stored name is printable and at most 64
// bytes, each exporter introduces at most 64 names (then "(other)"), far
// times are stored under the receive time so each interface has at most
// the receive day and its neighbours, blocks are not cut per record (at
// most one per partition and writeout, twice over), and every record is
// stored or counted — the counters equal what the exporters sent,
// computed here independently.
func TestHostileLayout(t *testing.T) {
	dir := t.TempDir()
	const writeout = 300 * time.Millisecond
	st, err := store.Open(store.Config{Dir: dir, Writeout: writeout, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	q := sink.NewQueue("store", st, 256, 1024)
	c, err := New(Config{Listen: []string{"udp://127.0.0.1:0"}, Sockets: 2, FlushInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx, q); close(done) }()
	t0 := time.Now()

	rng := rand.New(rand.NewPCG(21, 11))
	now := time.Now().UnixMilli()
	const day = 86_400_000
	const maxMs = int64(math.MaxInt64) / 1e6 // 2262-04-11; -maxMs is 1677-09-21
	randName := func() []byte {
		switch k := rng.IntN(10); {
		case k < 4:
			return []byte{'e', 't', 'h', byte('0' + rng.IntN(4))}
		case k < 7:
			b := make([]byte, 1+rng.IntN(300))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			return b
		case k < 8:
			return []byte("\x1b]0;owned\x07\x1b[2J" + string(rune('a'+rng.IntN(26))))
		default:
			return []byte("if-" + string(rune('a'+rng.IntN(26))) + string(rune('a'+rng.IntN(26))))
		}
	}
	type sim struct {
		table map[string]string   // the decoder's session names: raw (cut) → sanitised
		names map[string]struct{} // the names the exporter introduced
	}
	rows := map[string]int{} // expected rows by stored interface name
	var skewed, refused, perExporter, sent int
	exporters := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	for _, from := range exporters {
		u, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(from)}, c.Addrs()[0].(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		s := sim{table: map[string]string{}, names: map[string]struct{}{}}
		var seq uint32
		for range 80 {
			var recs []hostileRecord
			for size := 16 + 2*len(layoutTemplate) + 8; ; {
				r := hostileRecord{name: randName()}
				far := rng.IntN(10) < 8
				if far { // start and end anywhere from 1677 to 2262, but not within two days of now
					for _, p := range []*int64{&r.start, &r.end} {
						for *p = rng.Int64N(2*maxMs) - maxMs; *p > now-2*day && *p < now+2*day; {
							*p -= 4 * day
						}
					}
				} else { // a live exporter's: the last few hundred ms
					r.end = now - rng.Int64N(int64(writeout/time.Millisecond)/2)
					r.start = r.end - rng.Int64N(int64(writeout/time.Millisecond)/2)
				}
				if size += 16 + 16 + 3 + len(r.name); size > 1400 {
					break
				}
				if far {
					skewed++
				}
				recs = append(recs, r)
				// What the decoder and the collector make of the name.
				key := string(r.name[:min(len(r.name), ipfix.MaxNameKey)])
				name, ok := s.table[key]
				if !ok && len(s.table) < 256 {
					b, _ := ipfix.SanitiseName(nil, []byte(key))
					name, ok = string(b), true
					s.table[key] = name
				}
				switch _, known := s.names[name]; {
				case !ok:
					name = flow.OtherIface
					refused++
				case known:
				case len(s.names) >= DefaultMaxIfacesPerExporter:
					name = flow.OtherIface
					perExporter++
				default:
					s.names[name] = struct{}{}
				}
				rows[name]++
			}
			u.Write(hostileMsg(seq, recs))
			seq += uint32(len(recs))
			sent += len(recs)
			waitFor(t, "the collector to read", func() bool { return int(c.Stats().Records) >= sent-200 })
		}
		u.Close()
	}
	waitFor(t, "every record", func() bool { return c.Stats().Records == uint64(sent) })
	cancel()
	<-done
	elapsed := time.Since(t0)
	cs := c.Stats()
	if err := q.Close(); err != nil { // closes the store
		t.Fatal(err)
	}
	qs, ss := q.Stats(), st.Stats()

	if cs.SocketDrops != 0 || cs.Errors != [ipfix.NumDecodeErrors]uint64{} || cs.ClockSkew != uint64(skewed) ||
		cs.NamesRefused != uint64(refused) || cs.OtherIfaceExporter != uint64(perExporter) || cs.NamesSanitised == 0 {
		t.Errorf("ipfixrecv: %+v\nwant %d skewed, %d names refused, %d over the exporter's names", cs, skewed, refused, perExporter)
	}
	r, err := store.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := r.Blocks(0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	parts := map[[2]string]bool{}
	ifaces := map[string]bool{}
	stored := 0
	lo, hi := time.UnixMilli(now-day).UTC().Format("2006-01-02"), time.UnixMilli(now+day).UTC().Format("2006-01-02")
	for _, b := range blocks {
		got[b.Iface] += b.Rows
		stored += b.Rows
		parts[[2]string{b.Iface, b.Day}] = true
		ifaces[b.Iface] = true
		if b.Day < lo || b.Day > hi {
			t.Errorf("partition %q %s: outside %s..%s", b.Iface, b.Day, lo, hi)
		}
		if clean, changed := ipfix.SanitiseName(nil, []byte(b.Iface)); changed || string(clean) != b.Iface {
			t.Errorf("stored name %q is not printable UTF-8 of at most %d bytes", b.Iface, ipfix.MaxNameLen)
		}
	}
	if stored+int(qs.Dropped)+int(ss.DroppedRows) != sent || len(got) != len(rows) {
		t.Errorf("sent %d records: %d stored, %d dropped by the queue, %d by the store; %d interfaces, want %d",
			sent, stored, qs.Dropped, ss.DroppedRows, len(got), len(rows))
	}
	for name, n := range rows {
		if qs.Dropped == 0 && ss.DroppedRows == 0 && got[name] != n {
			t.Errorf("interface %q: %d rows, want %d", name, got[name], n)
		}
	}
	if len(ifaces) > len(exporters)*DefaultMaxIfacesPerExporter+1 || len(parts) > 3*len(ifaces) {
		t.Errorf("%d interfaces, %d partitions", len(ifaces), len(parts))
	}
	writeouts := int(elapsed/writeout) + 2
	if len(blocks) > 2*len(parts)*writeouts {
		t.Errorf("%d blocks for %d partitions and at most %d writeouts", len(blocks), len(parts), writeouts)
	}
	t.Logf("%d records from %d exporters in %v: %d interfaces, %d partitions, %d blocks, %.1f rows per block (at most %d writeouts: %.1f rows per partition and writeout)",
		sent, len(exporters), elapsed.Round(time.Millisecond), len(ifaces), len(parts), len(blocks),
		float64(stored)/float64(len(blocks)), writeouts, float64(stored)/float64(len(parts)*writeouts))
}
