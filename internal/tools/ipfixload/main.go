// Command ipfixload is the collector-tier benchmark's load: it sends the
// same paced IPFIX stream over loopback UDP to every -to address at once
// (so two collectors get the same datagrams at the same time), and counts
// what reached Kafka topics. It is a benchmark tool, not part of weir.
//
//	ipfixload send -to 127.0.0.1:4739,127.0.0.1:2055 -rate 200000 -duration 10s
//	ipfixload topics -brokers 127.0.0.1:9092 T1 T2   # create (4 partitions), idempotent
//	ipfixload count -brokers 127.0.0.1:9092 T1 T2    # records in each topic (sum of end offsets)
//
// send encodes unidirectional records (weir's ?biflow=off layout, which
// GoFlow2 reads whole) with weir's IPFIX encoder, -flows distinct IPv4
// flows, templates every 100 messages, and paces by record: every
// millisecond it sends what is due since the start, so a late wake-up
// sends a burst rather than falling behind. It prints records and
// datagrams sent and the rate reached.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/ipfix"
	"github.com/weir-dev/weir/internal/sink/kafka"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ipfixload send|topics|count [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "send":
		err = send(os.Args[2:])
	case "topics":
		err = topics(os.Args[2:])
	case "count":
		err = count(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: send, topics or count", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ipfixload:", err)
		os.Exit(1)
	}
}

func send(args []string) error {
	fs := flag.NewFlagSet("send", flag.ExitOnError)
	to := fs.String("to", "", "comma-separated loopback `host:port`s: each gets every datagram")
	rate := fs.Float64("rate", 100000, "records per second")
	dur := fs.Duration("duration", 10*time.Second, "how long to send")
	flows := fs.Int("flows", 10000, "distinct flows")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var conns []*net.UDPConn
	for _, a := range strings.Split(*to, ",") {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			return fmt.Errorf("-to %q: %w", a, err)
		}
		if !ap.Addr().IsLoopback() {
			return fmt.Errorf("-to %s: loopback only", a)
		}
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(ap))
		if err != nil {
			return err
		}
		defer c.Close()
		conns = append(conns, c)
	}
	if *rate <= 0 || *flows <= 0 || *dur <= 0 || *dur > time.Hour {
		return errors.New("-rate, -flows and -duration (at most 1h) must be positive")
	}
	var datagrams, sendErrs uint64
	enc, err := ipfix.NewEncoder(ipfix.Config{Domain: 1, Unidirectional: true, RefreshInterval: time.Second}, func(msg []byte) error {
		datagrams++
		for _, c := range conns {
			if _, err := c.Write(msg); err != nil {
				sendErrs++ // ECONNREFUSED while a collector is not up yet: counted, and said below
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	recs := make([]flow.Record, *flows)
	for i := range recs {
		r := &recs[i]
		r.Key.SetSrc(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
		r.Key.SetDst(netip.AddrFrom4([4]byte{192, 168, byte(i >> 8 & 3), byte(i%250 + 1)}))
		r.Key.SrcPort, r.Key.DstPort, r.Key.Proto = uint16(1024+i%60000), 443, flow.ProtoTCP
		r.Packets, r.Bytes, r.TCPFlags, r.EndReason = uint64(1+i%20), uint64(64+i%1400), 0x1b, flow.ReasonActive
	}
	start := time.Now()
	var sent int64
	total := int64(*rate * dur.Seconds())
	for sent < total {
		now := time.Now()
		due := min(int64(now.Sub(start).Seconds()**rate), total)
		ns := now.UnixNano()
		for ; sent < due; sent++ {
			r := &recs[sent%int64(len(recs))]
			r.Start, r.End = ns-int64(time.Second), ns
			if err := enc.Add(r); err != nil {
				return err
			}
		}
		time.Sleep(time.Millisecond)
	}
	if err := enc.Flush(); err != nil {
		return err
	}
	el := time.Since(start)
	fmt.Printf("sent %d records in %d datagrams to %d collectors in %.2fs: %.0f records/s\n", sent, datagrams, len(conns), el.Seconds(), float64(sent)/el.Seconds())
	if sendErrs > 0 {
		fmt.Printf("send errors %d (a collector refused: was it listening?)\n", sendErrs)
	}
	return nil
}

func client(args []string, name string) (*kgo.Client, []string, error) {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	brokers := fs.String("brokers", "", "comma-separated loopback `host:port`s of the brokers")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	if *brokers == "" || fs.NArg() == 0 {
		return nil, nil, errors.New(name + ": -brokers and topics are required")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...))
	return cl, fs.Args(), err
}

func topics(args []string) error {
	fs := flag.NewFlagSet("topics", flag.ExitOnError)
	brokers := fs.String("brokers", "", "comma-separated `host:port`s of the brokers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, t := range fs.Args() {
		created, err := kafka.EnsureTopic(ctx, &kafka.Config{Brokers: strings.Split(*brokers, ","), Topic: t, ClientID: "ipfixload"}, 4, 1)
		if err != nil {
			return err
		}
		fmt.Printf("topic %s: created %v\n", t, created)
	}
	return nil
}

// count prints each topic's records: the sum over its partitions of the
// end offset (no transactions, so offsets are records).
func count(args []string) error {
	cl, ts, err := client(args, "count")
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	meta := kmsg.NewPtrMetadataRequest()
	for _, t := range ts {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(t)
		meta.Topics = append(meta.Topics, mt)
	}
	mr, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	for _, t := range mr.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("topic %s: %w", *t.Topic, err)
		}
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = *t.Topic
		for _, p := range t.Partitions {
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Partition, lp.Timestamp = p.Partition, -1 // -1: the end offset
			lt.Partitions = append(lt.Partitions, lp)
		}
		lo.Topics = append(lo.Topics, lt)
	}
	lr, err := lo.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range lr.Topics {
		var n int64
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("topic %s partition %d: %w", t.Topic, p.Partition, err)
			}
			n += p.Offset
		}
		fmt.Printf("%s %d\n", t.Topic, n)
	}
	return nil
}
