package httpauth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ServerTLS is the server configuration of weir collect's tls://
// listeners: the certificate and key in PEM files and, with clientCA,
// client certificates required and checked against the CAs in that file.
func ServerTLS(certFile, keyFile, clientCA string) (*tls.Config, error) {
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
