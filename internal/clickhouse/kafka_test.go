package clickhouse

import (
	"context"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/sink/kafka"
	"github.com/weir-dev/weir/internal/testfleet"
)

// TestKafkaIngest, end to end on the real broker and ClickHouse 18.16:
// records sent by the Kafka sink are read by the server's own Kafka engine
// into flows and the rollups, every one exactly once (per flow: counts,
// bytes and records match what was sent). WEIR_INGEST_RECORDS sets how
// many (default 100,000); the log says the rate.
func TestKafkaIngest(t *testing.T) {
	n := 100000
	if v := os.Getenv("WEIR_INGEST_RECORDS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	fl := testfleet.Start(t, testfleet.Kafka|testfleet.ClickHouse)
	db, topic := fl.Database("weir"), testfleet.Unique("weir-flows")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	kc, err := kafka.ParseURL("kafka://" + fl.Kafka + "/" + topic + "?format=row") // the Kafka engine reads one-row messages without loss
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kafka.EnsureTopic(ctx, kc, 4, 1); err != nil {
		t.Fatal(err)
	}
	c, err := NewHTTP(fl.ClickHouse, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Setup(ctx, c, Config{Database: db, Kafka: kc.Brokers, Topic: topic, Group: testfleet.Unique("weir"), Consumers: 2}); err != nil {
		t.Fatal(err)
	}
	s, err := kafka.New(kc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const flows = 1000
	base := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	recs := make([]flow.Record, 1000)
	start := time.Now()
	for i := 0; i < n; i += len(recs) {
		for j := range recs {
			k := i + j
			r := &recs[j]
			*r = flow.Record{Packets: 1, Bytes: uint64(k % 1500), Start: base + int64(k)*int64(time.Millisecond), Iface: "eth0", Node: "node-" + strconv.Itoa(k%3)}
			r.End = r.Start
			r.Key.SetSrc(netip.AddrFrom4([4]byte{10, 0, byte(k % flows >> 8), byte(k % flows)}))
			r.Key.SetDst(netip.AddrFrom4([4]byte{10, 1, 0, 1}))
			r.Key.SrcPort, r.Key.DstPort, r.Key.Proto = 40000, 443, flow.ProtoTCP
		}
		s.Write(recs[:min(len(recs), n-i)])
		for s.Stats().Buffered > 1<<17 {
			time.Sleep(time.Millisecond)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	produced := time.Since(start)
	count := func(table, col string) uint64 {
		rc, err := c.Do(ctx, "SELECT toUInt64("+col+") FROM "+db+"."+table+" FORMAT RowBinary", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		return newReader(rc).u64()
	}
	deadline := time.Now().Add(5 * time.Minute)
	for count("flows", "count()") < uint64(n) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	queryable := time.Since(start)
	if got := count("flows", "count()"); got != uint64(n) {
		t.Fatalf("%d of %d records in ClickHouse", got, n)
	}
	t.Logf("%d records: into the broker in %v (%.0f records/s), all queryable in ClickHouse after %v (%.0f records/s end to end)",
		n, produced.Round(time.Millisecond), float64(n)/produced.Seconds(), queryable.Round(time.Millisecond), float64(n)/queryable.Seconds())
	var wantBytes uint64
	for k := range n {
		wantBytes += uint64(k % 1500)
	}
	if got := count("flows", "sum(bytes)"); got != wantBytes {
		t.Errorf("flows: %d bytes, want %d", got, wantBytes)
	}
	if got := count("flows", "uniqExact(src_addr)"); got != flows {
		t.Errorf("flows: %d distinct sources, want %d", got, flows)
	}
	for _, r := range Rollups {
		if got := count(r.Table, "sum(flows)"); got != uint64(n) {
			t.Errorf("%s: %d records", r.Table, got)
		}
		if got := count(r.Table, "sum(bytes)"); got != wantBytes {
			t.Errorf("%s: %d bytes, want %d", r.Table, got, wantBytes)
		}
	}
	if st := s.Stats(); st.Dropped != [3]uint64{} {
		t.Errorf("sink dropped %v", st.Dropped)
	}
}
