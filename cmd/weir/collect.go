package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"time"

	"github.com/weir-dev/weir/internal/agent"
	"github.com/weir-dev/weir/internal/httpauth"
	"github.com/weir-dev/weir/internal/ipfix"
	"github.com/weir-dev/weir/internal/source/ipfixrecv"
)

type collectOpts struct {
	rc                           ipfixrecv.Config // bound to its flags directly
	queueDepth                   int
	duration                     time.Duration
	tlsCert, tlsKey, tlsClientCA string
	http                         httpOpts
	priv                         privOpts
	stats                        bool
	sinks                        sinkOpts
	templateBudget               sizeFlag
}

func runCollect(args []string, stdout_, stderr io.Writer) int {
	var o collectOpts
	fs := helpFlagSet("collect")
	o.flags(fs)
	o.sinks.enrich.file.Log = stderr
	if done, code := parseFlags(fs, args, stdout_, stderr); done {
		return code
	}
	cfg, err := o.config(stdout_, stderr)
	if err != nil {
		return exitStatus(stderr, "collect", err)
	}
	return exitStatus(stderr, "collect", agent.Run(context.Background(), cfg))
}

func (o *collectOpts) flags(fs *flag.FlagSet) {
	fs.Var((*listFlag)(&o.rc.Listen), "listen", "receive on `url`: udp://HOST:PORT, tcp://HOST:PORT or tls://HOST:PORT; repeatable (default "+ipfixrecv.DefaultListen+")")
	fs.IntVar(&o.rc.Sockets, "sockets", 0, "SO_REUSEPORT sockets (and goroutines) per UDP address (0: one per CPU)")
	fs.DurationVar(&o.rc.Decoder.TemplateTimeout, "template-timeout", 30*time.Minute, "forget a UDP exporter's template not refreshed for this long")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate `file` for tls:// listeners")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM key `file` of --tls-cert")
	fs.StringVar(&o.tlsClientCA, "tls-client-ca", "", "require exporters' client certificates signed by the CA in this PEM `file`")
	fs.IntVar(&o.queueDepth, "queue-depth", 256, "batches of 1024 records queued per sink; a slow sink drops (and counts) beyond this")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long (0: run until SIGINT/SIGTERM)")
	o.http.flags(fs, "127.0.0.1:9465", "Prometheus metrics (/metrics)")
	o.priv.flags(fs)
	fs.BoolVar(&o.stats, "stats", false, "print counters (messages, records, errors by reason, records lost, socket drops) to stderr at exit")
	fs.DurationVar(&o.rc.HandshakeTimeout, "handshake-timeout", ipfixrecv.DefaultHandshakeTimeout, "close a tls:// connection whose handshake takes longer")
	fs.DurationVar(&o.rc.IdleConnTimeout, "idle-conn-timeout", ipfixrecv.DefaultIdleConnTimeout, "close a tcp:// or tls:// connection that sends nothing for this long")
	fs.DurationVar(&o.rc.MessageTimeout, "message-timeout", ipfixrecv.DefaultMessageTimeout, "close a tcp:// or tls:// connection whose message is not complete this long after its first byte")
	fs.IntVar(&o.rc.MaxConns, "max-conns", ipfixrecv.DefaultMaxConns, "TCP/TLS connections served at once; a new one past it evicts the one longest without a complete message, counted")
	fs.IntVar(&o.rc.MaxConnsPerSource, "max-conns-per-source", ipfixrecv.DefaultMaxConnsPerSource, "TCP/TLS connections served at once from one source address")
	o.templateBudget = ipfix.DefaultBudget
	fs.Var(&o.templateBudget, "template-budget", "memory `size` for all exporters' templates and sessions (64MiB); one exporter address may hold 1/16 of it")
	fs.IntVar(&o.rc.ExporterLimits.Sessions, "exporter-sessions", ipfix.DefaultExporterSessions, "sessions (observation domains; over UDP, source ports too) one exporter address may hold; past it its least recently used goes")
	fs.IntVar(&o.rc.ExporterLimits.Templates, "exporter-templates", ipfix.DefaultExporterTemplates, "templates one exporter address may hold; past it its least recently used session goes")
	fs.DurationVar(&o.rc.Decoder.DatalessTimeout, "dataless-timeout", ipfix.DefaultDatalessTimeout, "forget a UDP exporter's session (its templates) that sent no flow record for this long after it began")
	fs.DurationVar(&o.rc.MaxClockSkew, "max-clock-skew", ipfixrecv.DefaultMaxClockSkew, "give records whose times are further than this from the receive time the receive time (0: keep times as sent)")
	fs.IntVar(&o.rc.MaxIfacesPerExporter, "max-ifaces-per-exporter", ipfixrecv.DefaultMaxIfacesPerExporter, "distinct interface names one exporter address may introduce; later ones become \"(other)\"")
	o.sinks.flags(fs, false)
}

// config checks the flags and turns them into the agent's configuration.
func (o *collectOpts) config(stdout_, stderr io.Writer) (agent.Config, error) {
	c := &o.rc
	if o.queueDepth < 1 || o.duration < 0 || c.Decoder.TemplateTimeout <= 0 {
		return agent.Config{}, agent.Usagef("--queue-depth must be at least 1, --duration not negative, --template-timeout positive")
	}
	if c.HandshakeTimeout <= 0 || c.IdleConnTimeout <= 0 || c.MessageTimeout <= 0 || c.Decoder.DatalessTimeout <= 0 || c.MaxClockSkew < 0 {
		return agent.Config{}, agent.Usagef("--handshake-timeout, --idle-conn-timeout, --message-timeout and --dataless-timeout must be positive, --max-clock-skew not negative")
	}
	if c.MaxConns < 1 || c.MaxConnsPerSource < 1 || c.ExporterLimits.Sessions < 1 || c.ExporterLimits.Templates < 1 || c.MaxIfacesPerExporter < 1 {
		return agent.Config{}, agent.Usagef("--max-conns, --max-conns-per-source, --exporter-sessions, --exporter-templates and --max-ifaces-per-exporter must be at least 1")
	}
	if c.MaxClockSkew == 0 {
		c.MaxClockSkew = -1 // the collector's "keep times as sent"
	}
	c.Logf, c.TemplateBudget, c.Decoder.PEN = logf(stderr, "collect"), int64(o.templateBudget), uint32(o.sinks.ipfixPEN)
	ccfg := *c
	ccfg.Status = progressOut // stderr on a terminal: a one-line summary redrawn in place; nil otherwise
	if o.tlsCert != "" || o.tlsKey != "" || o.tlsClientCA != "" {
		t, err := httpauth.ServerTLS(o.tlsCert, o.tlsKey, o.tlsClientCA)
		if err != nil {
			return agent.Config{}, agent.Usagef("--tls-cert/--tls-key/--tls-client-ca: %v", err)
		}
		ccfg.TLS = t
	}
	o.sinks.store.Log = stderr
	sinks, err := o.sinks.sinks(stdout_, true)
	if err != nil {
		return agent.Config{}, err
	}
	files := sinks.Needs(o.sinks.enrich.file.Path)
	cfg := agent.Config{Sinks: sinks, Log: stderr, Live: true, QueueDepth: o.queueDepth, Duration: o.duration, HTTP: o.http.HTTP, API: o.http.api,
		Open: func() (agent.Producer, error) {
			c, err := ipfixrecv.New(ccfg)
			if errors.Is(err, ipfixrecv.ErrListen) {
				return nil, agent.Usagef("--listen: %v", err)
			}
			return agent.Of(c, err)
		},
		Ready: func() { o.priv.dropCaps(stderr, "collect", 0, "", files...) }} // every socket is bound
	if o.stats {
		cfg.Stats = stderr
	}
	return cfg, nil
}
