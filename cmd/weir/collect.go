package main

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/ipfix"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/sink"
	"github.com/weir-dev/weir/internal/source/ipfixrecv"
)

const collectExamples = `Examples:
  # Collect IPFIX and NetFlow v9/v5 on the standard port (loopback), store it
  weir collect

  # From the network, UDP and TLS; also re-export to another collector
  weir collect --listen udp://0.0.0.0:4739 --listen tls://0.0.0.0:4740 \
      --tls-cert server.pem --tls-key server.key --export ipfix+udp://10.0.0.9:4739

  # Print what arrives, one JSON record per flow, for 30 seconds
  weir collect --duration 30s -o json --data-dir off
`

type collectOpts struct {
	listen                       listFlag
	sockets, queueDepth          int
	duration                     time.Duration
	templateTimeout              time.Duration
	tlsCert, tlsKey, tlsClientCA string
	http                         httpOpts
	priv                         privOpts
	stats                        bool
	sinks                        sinkOpts
	// Bounds of what exporters and clients control.
	handshakeTimeout, idleConnTimeout time.Duration
	maxConns, maxConnsPerSource       int
	templateBudget                    sizeFlag
	exporterSessions, exporterTmpls   int
	datalessTimeout, maxClockSkew     time.Duration
	maxIfacesPerExporter              int
}

func runCollect(args []string, stdout_, stderr io.Writer) int {
	var o collectOpts
	fs := newFlagSet("collect", "weir collect [--listen URL]... [flags]",
		`Receive flow records from exporters (routers, softflowd, nfprobe, another
weir): IPFIX over UDP, TCP or TLS, and NetFlow v9 and v5 over UDP. Records go
to the same places captured ones do: the store (queried with 'weir query'),
stdout, and --export destinations. Templates are kept per exporter and
observation domain (per connection for TCP/TLS) and expire when not
refreshed; options templates (e.g. sampling) are decoded and kept. With
--ipfix-pen, weir's enterprise elements under that number (workloads,
service, rule, conntrack mark and zone) are read too. Malformed
messages are counted by reason (--stats, weir_collector_* metrics), never
fatal.`, collectExamples)
	fs.Var(&o.listen, "listen", "receive on `url`: udp://HOST:PORT, tcp://HOST:PORT or tls://HOST:PORT; repeatable (default "+ipfixrecv.DefaultListen+")")
	fs.IntVar(&o.sockets, "sockets", 0, "SO_REUSEPORT sockets (and goroutines) per UDP address (0: one per CPU)")
	fs.DurationVar(&o.templateTimeout, "template-timeout", 30*time.Minute, "forget a UDP exporter's template not refreshed for this long")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate `file` for tls:// listeners")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM key `file` of --tls-cert")
	fs.StringVar(&o.tlsClientCA, "tls-client-ca", "", "require exporters' client certificates signed by the CA in this PEM `file`")
	fs.IntVar(&o.queueDepth, "queue-depth", 256, "batches of 1024 records queued per sink; a slow sink drops (and counts) beyond this")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long (0: run until SIGINT/SIGTERM)")
	o.http.flags(fs, "127.0.0.1:9465", "Prometheus metrics (/metrics)")
	o.priv.flags(fs)
	fs.BoolVar(&o.stats, "stats", false, "print counters (messages, records, errors by reason, records lost, socket drops) to stderr at exit")
	fs.DurationVar(&o.handshakeTimeout, "handshake-timeout", ipfixrecv.DefaultHandshakeTimeout, "close a tls:// connection whose handshake takes longer")
	fs.DurationVar(&o.idleConnTimeout, "idle-conn-timeout", ipfixrecv.DefaultIdleConnTimeout, "close a tcp:// or tls:// connection that sends nothing for this long")
	fs.IntVar(&o.maxConns, "max-conns", ipfixrecv.DefaultMaxConns, "TCP/TLS connections served at once; more are closed at once, counted")
	fs.IntVar(&o.maxConnsPerSource, "max-conns-per-source", ipfixrecv.DefaultMaxConnsPerSource, "TCP/TLS connections served at once from one source address")
	o.templateBudget = ipfix.DefaultBudget
	fs.Var(&o.templateBudget, "template-budget", "memory `size` for all exporters' templates and sessions (64MiB); one exporter address may hold 1/16 of it")
	fs.IntVar(&o.exporterSessions, "exporter-sessions", ipfix.DefaultExporterSessions, "sessions (observation domains; over UDP, source ports too) one exporter address may hold; past it its least recently used goes")
	fs.IntVar(&o.exporterTmpls, "exporter-templates", ipfix.DefaultExporterTemplates, "templates one exporter address may hold; past it its least recently used session goes")
	fs.DurationVar(&o.datalessTimeout, "dataless-timeout", ipfix.DefaultDatalessTimeout, "forget a UDP exporter's session (its templates) that sent no flow record for this long after it began")
	fs.DurationVar(&o.maxClockSkew, "max-clock-skew", ipfixrecv.DefaultMaxClockSkew, "give records whose times are further than this from the receive time the receive time (0: keep times as sent)")
	fs.IntVar(&o.maxIfacesPerExporter, "max-ifaces-per-exporter", ipfixrecv.DefaultMaxIfacesPerExporter, "distinct interface names one exporter address may introduce; later ones become \"(other)\"")
	o.sinks.flags(fs)
	o.sinks.enrich.logw = stderr
	o.sinks.enrich.flags(fs)
	if done, code := parseFlags(fs, args, stdout_, stderr); done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "weir collect: "+format+"\n", a...)
		return exitUsage
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q", fs.Arg(0))
	}
	if o.queueDepth < 1 || o.duration < 0 || o.templateTimeout <= 0 {
		return fail("--queue-depth must be at least 1, --duration not negative, --template-timeout positive")
	}
	if o.handshakeTimeout <= 0 || o.idleConnTimeout <= 0 || o.datalessTimeout <= 0 || o.maxClockSkew < 0 {
		return fail("--handshake-timeout, --idle-conn-timeout and --dataless-timeout must be positive, --max-clock-skew not negative")
	}
	if o.maxConns < 1 || o.maxConnsPerSource < 1 || o.exporterSessions < 1 || o.exporterTmpls < 1 || o.maxIfacesPerExporter < 1 {
		return fail("--max-conns, --max-conns-per-source, --exporter-sessions, --exporter-templates and --max-ifaces-per-exporter must be at least 1")
	}
	skew := o.maxClockSkew
	if skew == 0 {
		skew = -1 // the collector's "keep times as sent"
	}
	cfg := ipfixrecv.Config{Listen: o.listen, Sockets: o.sockets,
		HandshakeTimeout: o.handshakeTimeout, IdleConnTimeout: o.idleConnTimeout,
		MaxConns: o.maxConns, MaxConnsPerSource: o.maxConnsPerSource, MaxIfacesPerExporter: o.maxIfacesPerExporter,
		TemplateBudget: int64(o.templateBudget), MaxClockSkew: skew,
		ExporterLimits: ipfix.ExporterLimits{Sessions: o.exporterSessions, Templates: o.exporterTmpls},
		Decoder:        ipfix.DecoderConfig{TemplateTimeout: o.templateTimeout, DatalessTimeout: o.datalessTimeout}}
	if o.tlsCert != "" || o.tlsKey != "" || o.tlsClientCA != "" {
		t, err := serverTLS(o.tlsCert, o.tlsKey, o.tlsClientCA)
		if err != nil {
			return fail("--tls-cert/--tls-key/--tls-client-ca: %v", err)
		}
		cfg.TLS = t
	}
	var ue errUsage
	o.sinks.stderr = stderr
	switch err := o.sinks.open(stdout_); {
	case errors.As(err, &ue):
		return fail("%v", err)
	case err != nil:
		fmt.Fprintf(stderr, "weir collect: %v\n", err)
		return exitFailure
	}
	cfg.Decoder.PEN = uint32(o.sinks.ipfixPEN) // checked by open
	// The HTTP listener first: a flag mistake there opens no socket for exporters.
	var reg *metrics.Registry
	if o.http.addr != "off" {
		reg = metrics.NewRegistry()
	}
	srv, code := o.http.serve(stderr, "collect", reg)
	if code != exitOK {
		o.sinks.close()
		return code
	}
	if srv != nil {
		defer srv.Close()
	}
	life := newLifecycle(o.duration)
	defer life.Close()
	out, queues := o.sinks.queued(o.queueDepth, false, life.stop)
	c, err := ipfixrecv.New(cfg, out)
	if err != nil {
		out.Close()
		if errors.Is(err, ipfixrecv.ErrListen) {
			return fail("--listen: %v", err)
		}
		fmt.Fprintf(stderr, "weir collect: %v\n", err)
		return exitFailure
	}
	if reg != nil {
		cols := []metrics.Collector{metrics.NewGoCollector(), metrics.NewProcessCollector(), c.Collector(), sink.QueueCollector(queues...)}
		for _, col := range append(cols, o.sinks.collectors()...) {
			if err := reg.Register(col); err != nil {
				out.Close()
				return fail("metrics: %v", err)
			}
		}
	}
	// UDP addresses have one SO_REUSEPORT socket per CPU: say each once.
	var said []string
	for _, a := range c.Addrs() {
		if s := a.Network() + " " + a.String(); !slices.Contains(said, s) {
			said = append(said, s)
			fmt.Fprintf(stderr, "weir collect: listening on %s\n", s)
		}
	}
	o.priv.dropCaps(stderr, "collect", 0, "", o.sinks.needs()...) // every socket is bound
	runErr := c.Run(life.ctx)
	closeErr := out.Close()
	if o.stats {
		printCollectStats(stderr, c.Stats())
		printQueueStats(stderr, queues)
		o.sinks.printStats(stderr)
	}
	if err := errors.Join(runErr, closeErr); err != nil {
		fmt.Fprintf(stderr, "weir collect: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// serverTLS builds the tls:// listeners' configuration.
func serverTLS(certFile, keyFile, clientCA string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("tls:// needs both --tls-cert and --tls-key")
	}
	kp, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		pem, err := os.ReadFile(clientCA)
		if err != nil {
			return nil, err
		}
		c.ClientCAs = x509.NewCertPool()
		if !c.ClientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate", clientCA)
		}
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// printCollectStats prints the collector's counters.
func printCollectStats(w io.Writer, st ipfixrecv.Stats) {
	n := format.Count
	fmt.Fprintf(w, "messages    %s IPFIX, %s NetFlow v9, %s NetFlow v5; %s sequence gaps: %s records lost (%s of them came late), %s NetFlow v9 export packets lost, %s resets\n",
		n(st.Messages[2]), n(st.Messages[1]), n(st.Messages[0]), n(st.SequenceGaps), n(st.LostRecords), n(st.LateRecords), n(st.LostPackets), n(st.SeqResets))
	if len(st.LossByExporter) > 0 { // the exporters that lost the most
		l := st.LossByExporter
		ex := slices.SortedFunc(maps.Keys(l), func(a, b netip.Addr) int {
			return cmp.Or(cmp.Compare(l[b].Records+l[b].Packets, l[a].Records+l[a].Packets), cmp.Compare(l[b].Gaps, l[a].Gaps), a.Compare(b))
		})
		fmt.Fprintf(w, "lost by    ")
		for i, a := range ex {
			if i == 5 {
				fmt.Fprintf(w, " (%d more exporters)", len(ex)-5)
				break
			}
			name := "other"
			if a != ipfixrecv.OtherExporter {
				name = a.String()
			}
			fmt.Fprintf(w, " %s %s records", name, n(l[a].Records))
			if l[a].Packets > 0 {
				fmt.Fprintf(w, " %s v9 packets", n(l[a].Packets))
			}
			fmt.Fprintf(w, " (%s gaps)", n(l[a].Gaps))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "socket      %s datagrams dropped by the kernel (UDP receive buffer full)\n", n(st.SocketDrops))
	fmt.Fprintf(w, "records     %s flows, %s options records; %s templates learnt, %s withdrawn, %s expired, %s held; %s sets skipped\n",
		n(st.Records), n(st.OptionsRecords), n(st.Templates), n(st.Withdrawals), n(st.Expired), n(st.TemplatesLive), n(st.SkippedSets))
	fmt.Fprintf(w, "sessions    %s held, %s of %s template state; forgotten:", n(st.SessionsLive), format.Bytes(uint64(st.BudgetUsed)), format.Bytes(uint64(st.BudgetLimit)))
	for i, c := range st.Evicted {
		fmt.Fprintf(w, " %s %s", ipfix.EvictReason(i), n(c))
	}
	fmt.Fprintf(w, "\nretimed     %s records with times past --max-clock-skew, %s without times\n", n(st.ClockSkew), n(st.NoTime))
	fmt.Fprintf(w, "ifaces      %s names sanitised; records named (other): %s over a session's or the budget's bound, %s over --max-ifaces-per-exporter, %s over the %s names in all\n",
		n(st.NamesSanitised), n(st.NamesRefused), n(st.OtherIfaceExporter), n(st.OtherIfaceGlobal), n(ipfixrecv.DefaultMaxIfaces))
	fmt.Fprintf(w, "errors     ")
	for i, c := range st.Errors {
		fmt.Fprintf(w, " %s %s", ipfix.DecodeError(i), n(c))
	}
	if st.InternFull > 0 {
		fmt.Fprintf(w, "; enterprise value tables emptied when full %s times", n(st.InternFull))
	}
	fmt.Fprintf(w, "\nconnections %s accepted, %s rejected (%s over --max-conns-per-source), %d open; closed: %s idle, %s handshake timeouts, %s failed handshakes; %s read errors, %s sink errors\n",
		n(st.ConnsAccepted), n(st.ConnsRejected+st.ConnsRejectedPerSource), n(st.ConnsRejectedPerSource), st.ConnsOpen,
		n(st.ConnsIdleClosed), n(st.HandshakeTimeouts), n(st.HandshakeFailures), n(st.ReadErrors), n(st.SinkErrors))
}
