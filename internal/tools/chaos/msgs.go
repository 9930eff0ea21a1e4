package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/ipfix"
	ipfixsink "github.com/weir-dev/weir/internal/sink/ipfix"
)

// oneFieldMsg is an IPFIX message of domain announcing template 256
// (protocolIdentifier, 1 octet) and, when data, carrying one record of it.
func oneFieldMsg(seq, domain uint32, data bool) []byte {
	b := make([]byte, 16, 32)
	binary.BigEndian.PutUint16(b, ipfix.Version)
	binary.BigEndian.PutUint32(b[4:], uint32(time.Now().Unix()))
	binary.BigEndian.PutUint32(b[8:], seq)
	binary.BigEndian.PutUint32(b[12:], domain)
	b = append(b, 0, 2, 0, 12, 1, 0, 0, 1, 0, 4, 0, 1)
	if data {
		b = append(b, 1, 0, 0, 5, 6)
	}
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	return b
}

// floodTemplates builds in buf a message of domain announcing templates
// first..first+n-1 of fields 4-octet fields each (known and unknown
// elements).
func floodTemplates(buf []byte, domain uint32, first uint16, n, fields int) []byte {
	be := binary.BigEndian
	buf = append(buf[:0], make([]byte, 16)...)
	be.PutUint16(buf, ipfix.Version)
	be.PutUint32(buf[12:], domain)
	buf = be.AppendUint16(buf, 2)
	buf = be.AppendUint16(buf, uint16(4+n*(4+4*fields)))
	for i := range n {
		buf = be.AppendUint16(buf, first+uint16(i))
		buf = be.AppendUint16(buf, uint16(fields))
		for f := range fields {
			buf = be.AppendUint16(buf, uint16(1+f%300))
			buf = be.AppendUint16(buf, 4)
		}
	}
	be.PutUint16(buf[2:], uint16(len(buf)))
	return buf
}

// hostileRecord is a record of hostileTemplate: any start and end (Unix
// ms, sent as unsigned64) and any interface name.
type hostileRecord struct {
	start, end int64
	name       []byte
}

// hostileTemplate is template 300: addresses, packets, octets,
// flowStart/EndMilliseconds, interfaceName (variable length).
var hostileTemplate = []uint16{300, 7, 8, 4, 12, 4, 2, 4, 1, 4, 152, 8, 153, 8, 82, 0xffff}

// hostileMsg encodes recs as one IPFIX message of domain 1 with the
// template.
func hostileMsg(seq uint32, recs []hostileRecord) []byte {
	be := binary.BigEndian
	b := make([]byte, 16, 1500)
	be.PutUint16(b, ipfix.Version)
	be.PutUint32(b[4:], uint32(time.Now().Unix()))
	be.PutUint32(b[8:], seq)
	be.PutUint32(b[12:], 1)
	b = be.AppendUint16(b, 2)
	b = be.AppendUint16(b, uint16(4+2*len(hostileTemplate)))
	for _, v := range hostileTemplate {
		b = be.AppendUint16(b, v)
	}
	set := len(b)
	b = append(b, 1, 44, 0, 0)
	for i, r := range recs {
		b = append(b, 10, 0, 0, byte(i), 192, 0, 2, 1, 0, 0, 0, 3, 0, 0, 0, 180)
		b = be.AppendUint64(b, uint64(r.start))
		b = be.AppendUint64(b, uint64(r.end))
		b = append(b, 255)
		b = be.AppendUint16(b, uint16(len(r.name)))
		b = append(b, r.name...)
	}
	be.PutUint16(b[set+2:], uint16(len(b)-set))
	be.PutUint16(b[2:], uint16(len(b)))
	return b
}

// hostileRecords makes up to ~1,400 bytes of records: random interface
// names (terminal escapes, random bytes, a few plain ones) and, in 8 of
// 10, times anywhere from 1677 to 2262 but not within two days of now;
// skewed counts the far ones.
func hostileRecords(rng *mrand.Rand, skewed *int) []hostileRecord {
	const day = 86_400_000
	const maxMs = int64(1<<63-1) / 1e6
	now := time.Now().UnixMilli()
	var recs []hostileRecord
	for size := 16 + 2*len(hostileTemplate) + 8; ; {
		var name []byte
		switch k := rng.IntN(10); {
		case k < 4:
			name = []byte{'e', 't', 'h', byte('0' + rng.IntN(4))}
		case k < 7:
			name = make([]byte, 1+rng.IntN(300))
			for i := range name {
				name[i] = byte(rng.Uint32())
			}
		case k < 8:
			name = []byte("\x1b]0;owned\x07\x1b[2J" + string(rune('a'+rng.IntN(26))))
		default:
			name = []byte("if-" + string(rune('a'+rng.IntN(26))) + string(rune('a'+rng.IntN(26))))
		}
		r := hostileRecord{name: name}
		far := rng.IntN(10) < 8
		if far {
			for _, p := range []*int64{&r.start, &r.end} {
				for *p = rng.Int64N(2*maxMs) - maxMs; *p > now-2*day && *p < now+2*day; {
					*p -= 4 * day
				}
			}
		} else {
			r.end = now - rng.Int64N(200)
			r.start = r.end - rng.Int64N(200)
		}
		if size += 16 + 16 + 3 + len(name); size > 1400 {
			return recs
		}
		if far {
			*skewed++
		}
		recs = append(recs, r)
	}
}

// goodRecords are n plain records of the last hour on interface iface.
func goodRecords(n int, seed uint64, iface string) []flow.Record {
	r := mrand.New(mrand.NewPCG(seed, 7))
	out := make([]flow.Record, n)
	t0 := time.Now().Add(-time.Hour).UnixMilli()
	for i := range out {
		rec := &out[i]
		rec.Key.IPVersion = 4
		rec.Key.SrcAddr = netip.AddrFrom4([4]byte{10, byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())}).As16()
		rec.Key.DstAddr = netip.AddrFrom4([4]byte{192, 0, 2, byte(r.Uint32())}).As16()
		rec.Key.Proto = flow.ProtoTCP
		rec.Key.SrcPort, rec.Key.DstPort = uint16(1024+r.IntN(60000)), 443
		rec.Packets, rec.RevPackets = 1+r.Uint64N(1000), r.Uint64N(1000)
		rec.Bytes, rec.RevBytes = 40+r.Uint64N(1e6), r.Uint64N(1e6)
		rec.Start = (t0 + r.Int64N(3e6)) * int64(time.Millisecond)
		rec.End = rec.Start + r.Int64N(1e5)*int64(time.Millisecond)
		rec.EndReason = flow.ReasonIdle
		rec.Iface = iface
	}
	return out
}

// export sends recs through weir's own IPFIX exporter to url and returns
// its stats after closing it.
func export(url string, cfg *tls.Config, recs []flow.Record, domain uint32) (ipfixsink.Stats, error) {
	x, err := ipfixsink.New(ipfixsink.Config{URL: url, TLS: cfg, Domain: domain, Log: os.Stderr})
	if err != nil {
		return ipfixsink.Stats{}, err
	}
	for i := 0; i < len(recs); i += 100 {
		if err := x.Write(recs[i:min(i+100, len(recs))]); err != nil {
			x.Close()
			return x.Stats(), err
		}
	}
	err = x.Close()
	return x.Stats(), err
}

// udpFrom is a UDP socket from the loopback address from to to.
func udpFrom(from, to string) (*net.UDPConn, error) {
	raddr, err := net.ResolveUDPAddr("udp", to)
	if err != nil {
		return nil, err
	}
	return net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(from)}, raddr)
}

// pki is a throwaway CA, a server certificate for 127.0.0.1 signed by it,
// and an unrelated CA.
type pki struct {
	ca, serverCert, serverKey, otherCA string
	pool                               *x509.CertPool
}

// writePKI writes the PEM files in dir.
func writePKI(dir string) (pki, error) {
	var p pki
	ca, caKey, caFile, _, err := mkcert(dir, "ca", nil, nil)
	if err != nil {
		return p, err
	}
	if _, _, p.serverCert, p.serverKey, err = mkcert(dir, "server", ca, caKey); err != nil {
		return p, err
	}
	if _, _, p.otherCA, _, err = mkcert(dir, "other-ca", nil, nil); err != nil {
		return p, err
	}
	p.ca = caFile
	p.pool = x509.NewCertPool()
	p.pool.AddCert(ca)
	return p, nil
}

// mkcert makes a P-256 key and a certificate for 127.0.0.1 (a CA when
// parent is nil) and writes both as PEM files.
func mkcert(dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, string, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, "", "", err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "weir chaos " + name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	signer, signKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	} else {
		signer, signKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		return nil, nil, "", "", err
	}
	c, _ := x509.ParseCertificate(der)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, "", "", err
	}
	cf, kf := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(cf, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, nil, "", "", err
	}
	if err := os.WriteFile(kf, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return nil, nil, "", "", fmt.Errorf("write key: %w", err)
	}
	return c, key, cf, kf, nil
}
