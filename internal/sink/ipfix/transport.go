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
	close() // after the last message: deliver what can be, count the rest
}

// errDown is returned for a message built while a stream collector is
// unreachable and the next reconnect is not due yet.
var errDown = errors.New("ipfix: collector unreachable")

type udpTransport struct {
	x    *Exporter
	conn *net.UDPConn
}

func (u *udpTransport) ready() {}

func (u *udpTransport) write(msg []byte, flows uint32) error {
	if _, err := u.conn.Write(msg); err != nil {
		u.x.lose(ReasonSendFailed, uint64(flows))
		u.x.warn.say(u.x.now(), u.x.url, ReasonSendFailed, err, "sending on")
		return err
	}
	return nil
}

func (u *udpTransport) close() { u.conn.Close() }

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
