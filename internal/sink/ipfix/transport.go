package ipfix

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
)

// transport carries whole messages to the collector and counts the flow
// records of those it could not deliver (Exporter.lose).
type transport interface {
	ready() // before a batch: connect if needed and due
	write(msg []byte, flows uint32) error
	flush() // after a batch: send what is held back
	close() // after the last message: deliver what can be, count the rest
}

// errDown is returned for a message built while a stream collector is
// unreachable and the next reconnect is not due yet.
var errDown = errors.New("ipfix: collector unreachable")

// udpTransport sends batches of messages (udpBatch), paced.
type udpTransport struct {
	x     *Exporter
	batch *udpBatch
	done  func(i int, err error) // sent, made once
}

func newUDPTransport(x *Exporter, conn *net.UDPConn, max int) *udpTransport {
	u := &udpTransport{x: x, batch: newUDPBatch(conn, max)}
	u.done = u.sent
	return u
}

func (u *udpTransport) ready() {}

// write holds msg back until the batch is full or flushed; the messages
// are counted as they leave (sent).
func (u *udpTransport) write(msg []byte, flows uint32) error {
	if u.batch.add(msg, flows) {
		u.flush()
	}
	return nil
}

func (u *udpTransport) flush() {
	if u.batch.len() == 0 {
		return
	}
	u.x.pace(u.batch.len())
	u.batch.send(u.done)
	u.batch.reset()
}

// sent counts message i of the batch: sent, or refused by the socket.
func (u *udpTransport) sent(i int, err error) {
	x := u.x
	if err != nil {
		x.stats.errs.Add(1)
		x.lose(ReasonSendFailed, uint64(u.batch.flows[i]))
		x.warn.say(x.now(), x.url, ReasonSendFailed, err, "sending on")
		return
	}
	x.stats.messages.Add(1)
	x.stats.bytes.Add(uint64(len(u.batch.msg(i))))
}

func (u *udpTransport) close() {
	u.flush()
	u.batch.conn.Close()
}

// TLSConfig builds the client TLS configuration of ipfix+tls:// from PEM
// files: caFile (the collector's CA; "" for the system roots) and, for
// mutual TLS, certFile and keyFile (both or neither).
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("a client certificate needs both the certificate and the key file")
	}
	if certFile != "" {
		kp, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c, nil
}
