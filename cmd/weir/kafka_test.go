package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/sink/kafka"
)

// TestCaptureKafka: --export kafka:// sends every record to the topic,
// each named by --node-name, and --stats says so; the sink is wired by one
// line in internal/agent.
func TestCaptureKafka(t *testing.T) {
	const topic = "weir-flows"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	code, _, errs := runCLI("capture", "--synthetic", "flows=300,packets=3000", "-o", "none", "--stats", "--node-name", "edge-1",
		"--export", "kafka://"+addr+"/"+topic+"?compression=zstd&acks=all")
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, errs)
	}
	m := regexp.MustCompile(`export: (\d+) records to kafka://\S+: (\d+) acknowledged`).FindStringSubmatch(errs)
	if m == nil || m[1] != m[2] {
		t.Fatalf("no kafka export line with every record acknowledged:\n%s", errs)
	}
	want, _ := strconv.Atoi(m[1])
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, nodes := 0, map[string]int{}
	for got < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var rec flow.Record
			if _, err := kafka.Rows(r, &rec, func(rec *flow.Record) {
				got++
				nodes[rec.Node]++
			}); err != nil {
				t.Fatalf("message %d/%d: %v", r.Partition, r.Offset, err)
			}
		})
	}
	if got != want || want < 300 || nodes["edge-1"] != want {
		t.Errorf("%d records on the topic, %d exported (want ≥ 300), nodes %v", got, want, nodes)
	}
	if !strings.Contains(errs, "sink queue  export kafka://") {
		t.Errorf("no queue line for the kafka sink:\n%s", errs)
	}
}
