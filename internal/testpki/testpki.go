// Package testpki writes a throwaway certificate authority and
// certificates for 127.0.0.1 signed by it, for tests of TLS transports.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Files are the PEM files Write creates.
type Files struct {
	CA                    string // the CA's certificate
	ServerCert, ServerKey string // for 127.0.0.1, signed by the CA
	ClientCert, ClientKey string // signed by the CA
	OtherCA               string // an unrelated CA
}

// Write creates the files in dir (a test's temporary directory).
func Write(t testing.TB, dir string) Files {
	t.Helper()
	ca, caKey, caFile, _ := cert(t, dir, "ca", nil, nil)
	_, _, sc, sk := cert(t, dir, "server", ca, caKey)
	_, _, cc, ck := cert(t, dir, "client", ca, caKey)
	_, _, other, _ := cert(t, dir, "other-ca", nil, nil)
	return Files{CA: caFile, ServerCert: sc, ServerKey: sk, ClientCert: cc, ClientKey: ck, OtherCA: other}
}

// cert makes a key and a certificate for 127.0.0.1 (self-signed CA when
// parent is nil) and writes both as PEM.
func cert(t testing.TB, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	signer := key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		parent = tmpl
	} else {
		signer = parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	for f, b := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(f, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c, key, certFile, keyFile
}
