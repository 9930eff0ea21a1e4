package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// goldenV9Recs are the records of block-v9.bin: version 8's, reshaped so
// that every coding version 9 added is used: IPv4 sources from 40 hosts
// of one /24 (an address set and adicts), a few services (the tuple),
// reverse packets a steady ratio of the forward ones (ratio) and reverse
// bytes whole multiples of them (per packet).
func goldenV9Recs() []flow.Record {
	recs := goldenV8Recs()
	svc := [...]struct {
		port  uint16
		proto uint8
	}{{443, flow.ProtoTCP}, {53, flow.ProtoUDP}, {80, flow.ProtoTCP}, {123, flow.ProtoUDP}}
	for i := range recs {
		r := &recs[i]
		if v4Mapped(&r.Key.SrcAddr) {
			k := i * 37 % 40
			if i%3 == 0 {
				k = i % 5
			}
			flow.SetAddr4(&r.Key.SrcAddr, []byte{10, 0, 7, byte(2 + k*5)})
		}
		s := svc[(i*i)%len(svc)]
		if i%4 != 0 {
			s = svc[0]
		}
		r.Key.DstPort, r.Key.Proto, r.Key.ICMPType, r.Key.ICMPCode = s.port, s.proto, 0, 0
		if r.PostNAT != (flow.Key{}) {
			r.PostNAT.Proto, r.PostNAT.ICMPType, r.PostNAT.ICMPCode = s.proto, 0, 0 // the NAT columns share the key's protocol and ICMP fields
		}
		r.TCPFlags, r.RevTCPFlags = 0, 0
		if s.proto == flow.ProtoTCP {
			r.TCPFlags, r.RevTCPFlags = flow.TCPSyn|flow.TCPAck|flow.TCPFin, flow.TCPSyn|flow.TCPAck
		}
		r.RevPackets = r.Packets * uint64(1+i%3) / 2
		r.RevBytes = r.RevPackets * uint64(60+i*7%1400)
	}
	return recs
}

// TestWriteGoldenV9 writes testdata/block-v9.bin when WEIR_STORE_GOLDEN is
// set (once, when version 9 was current; never overwrite it after).
func TestWriteGoldenV9(t *testing.T) {
	if os.Getenv("WEIR_STORE_GOLDEN") == "" {
		t.Skip("set WEIR_STORE_GOLDEN=1 to write testdata/block-v9.bin")
	}
	b, h := newTestEncoder(t).encode(nil, goldenV9Recs())
	if b[12] != 9 || h.cols[cSrcAddr].enc != encADictS || h.cols[cDstPort].enc != encTuple ||
		h.cols[cRevPackets].flags&flagRatio == 0 || h.cols[cRevBytes].flags&flagPerPkt == 0 {
		t.Fatalf("version %d, SrcAddr encoding %d, DstPort encoding %d, RevPackets flags %d, RevBytes flags %d",
			b[12], h.cols[cSrcAddr].enc, h.cols[cDstPort].enc, h.cols[cRevPackets].flags, h.cols[cRevBytes].flags)
	}
	if err := os.WriteFile(filepath.Join("testdata", "block-v9.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
