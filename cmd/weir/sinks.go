package main

import (
	"flag"
	"io"
	"os"

	"github.com/weir-dev/weir/internal/agent"
)

// sinkOpts are the flags that say where records go (capture and collect
// share them): stdout, the store, --export destinations.
type sinkOpts struct {
	output                          string
	top                             int
	store                           storeOpts
	export                          listFlag
	exportRate                      float64
	exportCA, exportCert, exportKey string
	ipfixPEN                        uint64
	node                            string
	enrich                          enrichOpts
}

func (o *sinkOpts) flags(fs *flag.FlagSet, node bool) {
	o.store.flags(fs)
	o.exportFlags(fs, "also send every record to `url`: IPFIX to ipfix+udp://, ipfix+tcp:// or ipfix+tls://HOST:PORT (options ?mtu=BYTES, "+
		"?biflow=off for GoFlow2 and nfacctd, ?sets=one for vmware/go-ipfix), or Kafka to kafka://BROKER[,BROKER]/TOPIC "+
		"(options ?compression=zstd|lz4|snappy|gzip|none, ?acks=all|leader|none, ?tls=1, docs/fleet.md); repeatable",
		"IPFIX messages per second per UDP --export destination (paced so a burst does not overflow the collector; 0: unpaced)",
		"IANA Private Enterprise `number` under which IPFIX carries the workloads, service, rule, conntrack mark and zone "+
			"as enterprise elements (--export sends them, weir collect reads them); 0: not sent, and read from no one. weir has no PEN of its own: "+
			"use your organisation's (RFC 5612's 32473 is for documentation and examples only)")
	fs.StringVar(&o.output, "output", "table", "output `format`: table, json or none")
	fs.StringVar(&o.output, "o", "table", "short for --output")
	fs.IntVar(&o.top, "top", 20, "with --output=table: show the top `n` flows by bytes at the end; 0 prints every record as it is emitted")
	if node {
		host, _ := os.Hostname()
		fs.StringVar(&o.node, "node-name", host, "name this host in every record (node in JSON, the store, IPFIX and Kafka): default the host name for live sources, none for --read and --synthetic")
	}
	o.enrich.flags(fs)
}

// exportFlags are --export and its options, with the usages that differ
// between the commands.
func (o *sinkOpts) exportFlags(fs *flag.FlagSet, export, rate, pen string) {
	fs.Var(&o.export, "export", export)
	fs.Float64Var(&o.exportRate, "export-rate", agent.DefaultExportRate, rate)
	fs.StringVar(&o.exportCA, "export-ca", "", "PEM `file` of the CA that signed ipfix+tls:// collectors' certificates (default: the system roots)")
	fs.StringVar(&o.exportCert, "export-cert", "", "PEM `file` of the client certificate for ipfix+tls:// (mutual TLS; with --export-key)")
	fs.StringVar(&o.exportKey, "export-key", "", "PEM `file` of the client certificate's key")
	fs.Uint64Var(&o.ipfixPEN, "ipfix-pen", 0, pen)
}

// storeFault, set only by tests, wraps the store to make it fail or hang.
var storeFault agent.Wrap

// sinks is the agent's configuration of the sinks; withStore says whether
// the store is wanted at all (a replay writes it only when --data-dir is
// given).
func (o *sinkOpts) sinks(stdout_ io.Writer, withStore bool) (agent.Sinks, error) {
	s := agent.Sinks{Format: o.output, Top: o.top, Stdout: stdout_, Export: o.export, ExportRate: o.exportRate,
		ExportCA: o.exportCA, ExportCert: o.exportCert, ExportKey: o.exportKey, PEN: o.ipfixPEN,
		Node: o.node, Enrich: o.enrich.agent(), WrapStore: storeFault}
	if withStore {
		cfg, err := o.store.config()
		if err != nil {
			return s, err
		}
		s.Store = cfg
	}
	return s, nil
}
