package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults of the URL's options.
const (
	DefaultBufferRecords = 1 << 18   // records buffered while the broker is slow or away
	DefaultBufferBytes   = 128 << 20 // and their bytes
	DefaultLinger        = 10 * time.Millisecond
	DefaultCloseTimeout  = 10 * time.Second
	DefaultPort          = "9092"
	maxBufferRecords     = 1 << 24
)

// Config is a parsed kafka:// export URL.
type Config struct {
	URL         string   // as given, without secrets (there are none in it)
	Brokers     []string // HOST:PORT each
	Topic       string
	Compression string // zstd, lz4, snappy, gzip or none
	// Format is "packed" (up to 256 rows a message, for weir ingest) or
	// "row" (one row a message, for ClickHouse's Kafka engine).
	Format string
	Acks   string // all, leader or none
	// TLS is nil without tls=1.
	TLS *tls.Config
	// SASL is "", plain, scram-sha-256 or scram-sha-512; User and
	// Password its credentials (the password read from password-file).
	SASL, User, Password string
	BufferRecords        int           // at most this many records buffered
	BufferBytes          int           // and this many bytes of them
	Linger               time.Duration // how long a partition gathers records before a request
	CloseTimeout         time.Duration // how long Close waits for the buffer to drain
	ClientID             string
}

// Packed reports whether messages hold many rows (?format=packed).
func (c *Config) Packed() bool { return c.Format == "packed" }

// ErrURL wraps every export URL mistake.
var ErrURL = errors.New("kafka: bad export URL")

const urlForm = "want kafka://BROKER[:PORT][,BROKER…]/TOPIC[?format=packed|row&compression=zstd|lz4|snappy|gzip|none&acks=all|leader|none" +
	"&tls=1&ca=FILE&cert=FILE&key=FILE&sasl=plain|scram-sha-256|scram-sha-512&user=NAME&password-file=FILE" +
	"&buffer-records=N&buffer-bytes=N&linger=DURATION&close-timeout=DURATION&client-id=NAME]"

var options = []string{"format", "compression", "acks", "tls", "ca", "cert", "key", "server-name", "sasl", "user", "password-file",
	"allow-plaintext-sasl", "buffer-records", "buffer-bytes", "linger", "close-timeout", "client-id"}

// ParseURL parses and checks a kafka:// export URL, reading the files it
// names (CA, client certificate, password). Secrets are taken only from
// files: a password in the URL is refused, so that it shows in no process
// list, shell history or log.
func ParseURL(s string) (*Config, error) {
	bad := func(format string, a ...any) (*Config, error) {
		return nil, fmt.Errorf("%w %q: %s", ErrURL, redact(s), fmt.Sprintf(format, a...))
	}
	// The broker list is cut off by hand: net/url takes one host only.
	rest, ok := strings.CutPrefix(s, "kafka://")
	if !ok {
		return bad("%s", urlForm)
	}
	hosts, path, _ := strings.Cut(rest, "/")
	if strings.Contains(hosts, "@") {
		return bad("credentials in the URL would show in process lists and logs: use user=NAME&password-file=FILE")
	}
	u, err := url.Parse("kafka://broker/" + path)
	if err != nil || hosts == "" {
		return bad("%s", urlForm)
	}
	c := &Config{URL: s, Format: "packed", Compression: "zstd", Acks: "all", BufferRecords: DefaultBufferRecords, BufferBytes: DefaultBufferBytes,
		Linger: DefaultLinger, CloseTimeout: DefaultCloseTimeout, ClientID: "weir"}
	for b := range strings.SplitSeq(hosts, ",") {
		host, port, err := net.SplitHostPort(b)
		if err != nil { // no port
			host, port = strings.Trim(b, "[]"), DefaultPort
		}
		if n, err := strconv.Atoi(port); host == "" || strings.ContainsAny(host, "[]/?#%") || err != nil || n <= 0 || n > 65535 {
			return bad("broker %q: want HOST or HOST:PORT", b)
		}
		c.Brokers = append(c.Brokers, net.JoinHostPort(host, port))
	}
	c.Topic = strings.TrimPrefix(u.Path, "/")
	if err := checkTopic(c.Topic); err != nil {
		return bad("%v", err)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("options: %v", err)
	}
	for k, v := range q {
		if !slices.Contains(options, k) {
			return bad("unknown option %q; options: %s", k, strings.Join(options, ", "))
		}
		if len(v) != 1 {
			return bad("option %s given %d times", k, len(v))
		}
	}
	if v := q.Get("compression"); v != "" {
		if !slices.Contains([]string{"zstd", "lz4", "snappy", "gzip", "none"}, v) {
			return bad("compression=%s: want zstd, lz4, snappy, gzip or none", v)
		}
		c.Compression = v
	}
	if v := q.Get("format"); v != "" {
		if v != "packed" && v != "row" {
			return bad("format=%s: want packed (many rows a message, for weir ingest) or row (one, for ClickHouse's Kafka engine)", v)
		}
		c.Format = v
	}
	if v := q.Get("acks"); v != "" {
		if v != "all" && v != "leader" && v != "none" {
			return bad("acks=%s: want all (every in-sync replica), leader or none", v)
		}
		c.Acks = v
	}
	flag := func(k string) (bool, error) {
		switch q.Get(k) {
		case "":
			return false, nil
		case "1", "true":
			return true, nil
		case "0", "false":
			return false, nil
		}
		return false, fmt.Errorf("%s=%s: want 1 or 0", k, q.Get(k))
	}
	useTLS, err := flag("tls")
	if err != nil {
		return bad("%v", err)
	}
	plainOK, err := flag("allow-plaintext-sasl")
	if err != nil {
		return bad("%v", err)
	}
	if !useTLS && (q.Has("ca") || q.Has("cert") || q.Has("key") || q.Has("server-name")) {
		return bad("ca, cert, key and server-name need tls=1")
	}
	if useTLS {
		if c.TLS, err = tlsConfig(q.Get("ca"), q.Get("cert"), q.Get("key")); err != nil {
			return bad("%v", err)
		}
		c.TLS.ServerName = q.Get("server-name")
	}
	switch c.SASL = q.Get("sasl"); c.SASL {
	case "":
		if q.Has("user") || q.Has("password-file") {
			return bad("user and password-file need sasl=plain, scram-sha-256 or scram-sha-512")
		}
	case "plain", "scram-sha-256", "scram-sha-512":
		c.User = q.Get("user")
		if c.User == "" || !q.Has("password-file") {
			return bad("sasl=%s needs user=NAME and password-file=FILE", c.SASL)
		}
		if c.Password, err = readSecret(q.Get("password-file")); err != nil {
			return bad("%v", err)
		}
		if c.SASL == "plain" && !useTLS && !plainOK {
			return bad("sasl=plain without tls=1 sends the password in clear: add tls=1 (or allow-plaintext-sasl=1 on a network you trust)")
		}
	default:
		return bad("sasl=%s: want plain, scram-sha-256 or scram-sha-512", c.SASL)
	}
	num := func(k string, dst *int, lo, hi int) error {
		if !q.Has(k) {
			return nil
		}
		n, err := strconv.Atoi(q.Get(k))
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("%s=%s: want a number from %d to %d", k, q.Get(k), lo, hi)
		}
		*dst = n
		return nil
	}
	if err := num("buffer-records", &c.BufferRecords, 1, maxBufferRecords); err != nil {
		return bad("%v", err)
	}
	if err := num("buffer-bytes", &c.BufferBytes, 1<<16, min(1<<34, math.MaxInt)); err != nil { // 16 GiB, or what a 32-bit int holds
		return bad("%v", err)
	}
	dur := func(k string, dst *time.Duration, hi time.Duration) error {
		if !q.Has(k) {
			return nil
		}
		d, err := time.ParseDuration(q.Get(k))
		if err != nil || d < 0 || d > hi {
			return fmt.Errorf("%s=%s: want a duration from 0 to %v", k, q.Get(k), hi)
		}
		*dst = d
		return nil
	}
	if err := dur("linger", &c.Linger, 10*time.Second); err != nil {
		return bad("%v", err)
	}
	if err := dur("close-timeout", &c.CloseTimeout, 10*time.Minute); err != nil {
		return bad("%v", err)
	}
	if v := q.Get("client-id"); v != "" {
		if err := checkTopic(v); err != nil { // the same safe alphabet
			return bad("client-id: %v", err)
		}
		c.ClientID = v
	}
	return c, nil
}

// checkTopic applies Kafka's rule for topic names.
func checkTopic(t string) error {
	if t == "" || len(t) > 249 || t == "." || t == ".." {
		return fmt.Errorf("topic %q: want 1 to 249 of a-z A-Z 0-9 . _ -", t)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic %q: want 1 to 249 of a-z A-Z 0-9 . _ -", t)
		}
	}
	return nil
}

// readSecret reads a password file: at most 4 KiB, one line (a trailing
// newline is dropped), a regular file.
func readSecret(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("password-file: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > 4096 {
		return "", fmt.Errorf("password-file %s: want a regular file of at most 4096 bytes", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("password-file: %w", err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" || strings.ContainsAny(s, "\r\n") {
		return "", fmt.Errorf("password-file %s: want the password alone on one line", path)
	}
	return s, nil
}

// tlsConfig builds the client's TLS: the system's roots or the CA file's,
// and a client certificate when both files are given.
func tlsConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("ca: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca %s: no PEM certificate", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("a client certificate needs both cert=FILE and key=FILE")
	}
	if certFile != "" {
		kp, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c, nil
}

// redact drops any user info from a URL before it is shown.
func redact(s string) string {
	rest, ok := strings.CutPrefix(s, "kafka://")
	hosts, path, _ := strings.Cut(rest, "/")
	if i := strings.LastIndexByte(hosts, '@'); ok && i >= 0 {
		return "kafka://REDACTED@" + hosts[i+1:] + "/" + path
	}
	return s
}
