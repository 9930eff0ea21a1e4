package ipfix

import (
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
)

// Reason says why records were not delivered to a destination.
type Reason uint8

// Why records were not delivered. Records built while a stream collector
// is down count under the cause of the outage (the failed dial or
// handshake, the lost or stalled connection) until it is back.
const (
	// ReasonDialFailed: no TCP connection (refused, timed out, no route,
	// name not resolved).
	ReasonDialFailed Reason = iota
	// ReasonTLSHandshake: the TLS handshake failed (the exporter refused
	// the collector's certificate or the collector refused the
	// exporter's), or the collector rejected the session right after it
	// (TLS 1.3 sends a client certificate's rejection after the
	// client's handshake is done): every record written into such a
	// session counts, acknowledged or not.
	ReasonTLSHandshake
	// ReasonConnectionLost: the collector closed or reset the
	// connection: the records whose bytes its kernel had not
	// acknowledged (SIOCOUTQ), and those built until the reconnect.
	ReasonConnectionLost
	// ReasonWriteFailed: a write timed out (a stalled collector) or
	// failed otherwise: the message written and the unacknowledged ones.
	ReasonWriteFailed
	// ReasonSendFailed: UDP: the socket refused the message (an ICMP
	// port unreachable from an earlier one, a full buffer).
	ReasonSendFailed
	// ReasonQueueFull: the destination's queue was full (the collector
	// or the pace is slower than the records come; CountQueue).
	ReasonQueueFull
	// ReasonShutdown: records the collector had not acknowledged when the
	// exporter closed, after waiting Config.Linger for it.
	ReasonShutdown
	NumReasons
)

var reasonNames = [NumReasons]string{"dial_failed", "tls_handshake", "connection_lost", "write_failed", "send_failed", "queue_full", "shutdown"}

// String is the reason's label in metrics and --stats.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "reason_" + strconv.Itoa(int(r))
}

// streamReasons and udpReasons are the reasons each transport can have.
var (
	streamReasons = []Reason{ReasonDialFailed, ReasonTLSHandshake, ReasonConnectionLost, ReasonWriteFailed, ReasonQueueFull, ReasonShutdown}
	udpReasons    = []Reason{ReasonSendFailed, ReasonQueueFull}
)

// warnEvery is how often one cause is said again while it lasts.
const warnEvery = time.Minute

// warner says on stderr why records are not delivered: once per cause,
// again when the cause changes or after warnEvery while it lasts, never
// per record.
type warner struct {
	mu   sync.Mutex
	w    io.Writer
	last Reason
	at   time.Time // when last was said; zero: nothing said yet
}

// say writes one line for cause r unless it was said within warnEvery.
func (s *warner) say(now time.Time, url string, r Reason, err error, then string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.IsZero() && s.last == r && now.Sub(s.at) < warnEvery {
		return
	}
	s.last, s.at = r, now
	msg := ""
	if err != nil {
		msg = ": " + printable(err.Error())
	}
	fmt.Fprintf(s.w, "weir: export to %s: %s%s; %s (counted as undelivered, reason %s)\n", url, r.phrase(), msg, then, r)
}

// recovered says that the destination works again after a failure.
func (s *warner) recovered(url string, fails int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at.IsZero() {
		return
	}
	s.at = time.Time{}
	fmt.Fprintf(s.w, "weir: export to %s: connected after %d failed attempts\n", url, fails)
}

func (r Reason) phrase() string {
	switch r {
	case ReasonDialFailed:
		return "cannot connect"
	case ReasonTLSHandshake:
		return "TLS handshake failed (check --export-ca, --export-cert and the collector's CA)"
	case ReasonConnectionLost:
		return "the collector closed the connection"
	case ReasonWriteFailed:
		return "write failed (a stalled collector?)"
	case ReasonSendFailed:
		return "the socket refused a message (is the collector listening?)"
	case ReasonShutdown:
		return "records not acknowledged at shutdown"
	}
	return r.String()
}

// printable escapes what a terminal would interpret: errors can carry
// names from the collector's certificate.
func printable(s string) string {
	q := strconv.QuoteToGraphic(s)
	return q[1 : len(q)-1]
}
