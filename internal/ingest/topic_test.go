package ingest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// recreateTopic deletes the test topic and creates it again under the
// same name (4 partitions, offsets from 0 again, a new topic ID).
func recreateTopic(t *testing.T, addr string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr(topic)
	del.Topics, del.TopicNames = append(del.Topics, dt), []string{topic}
	dr, err := del.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range dr.Topics {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("deleting %s: %v", topic, err)
		}
	}
	cr := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, 4, 1
	cr.Topics = append(cr.Topics, ct)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := cr.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		if err == nil {
			return
		}
		if err != kerr.TopicAlreadyExists || time.Now().After(deadline) { // the deletion still under way
			t.Fatalf("creating %s again: %v", topic, err)
		}
	}
}

// TestTopicRecreated: the topic is deleted and created again under the
// same name, its offsets from 0 again, below the marks of the old one.
// Its records are new: a consumer that starts after it inserts every one
// of them, none skipped as replayed.
func TestTopicRecreated(t *testing.T) {
	c := newCluster(t)
	addr := c.ListenAddrs()[0]
	ch, chURL := newFakeCH(t)
	produce(t, addr, "", records(0, 3000))
	stop(t, ingestUntil(t, addr, ch, chURL, "g", 1000, 3000))

	recreateTopic(t, addr)
	produce(t, addr, "", records(3000, 500))
	b := ingestUntil(t, addr, ch, chURL, "g", 1000, 3500)
	stop(t, b)
	if n, total := ch.count(); n != 3500 || total != 3500 {
		t.Fatalf("%d records inserted, %d times in all; want 3500 once each", n, total)
	}
	if st := b.Stats(); st.Replayed != 0 {
		t.Fatalf("%d messages of the new topic skipped as replayed: %+v", st.Replayed, st)
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	keys := 0
	for k := range ch.marks {
		if !strings.HasPrefix(k, "g/"+topic+"@") || len(k) != len("g/"+topic+"@")+32 {
			t.Errorf("marks under %q: want the topic's name, @ and its ID in hex", k)
		}
		keys++
	}
	if keys != 2 {
		t.Errorf("marks under %d keys, want one for each of the topic's 2 incarnations", keys)
	}
}
