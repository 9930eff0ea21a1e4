package gendb

import (
	"bufio"
	"errors"
	"io"
	"net/netip"
	"strconv"

	"github.com/weir-dev/weir/internal/flow"
)

// CSVHeader names the columns CSV writes, in order: the attributes the
// generator sets (times in Unix ns, as generated; the store keeps them at
// its time precision).
var CSVHeader = []string{"src_ip", "dst_ip", "src_port", "dst_port", "proto", "icmp_type",
	"packets", "bytes", "rev_packets", "rev_bytes", "tcp_flags", "rev_tcp_flags",
	"start_ns", "end_ns", "end_reason", "iface"}

// CSV writes generated records as CSV lines (RFC 4180, a header line
// first), so that other engines (DuckDB in make bench) can load the same
// rows the store holds. Interface names are the generator's own
// (--ifaces), written as given but for quoting.
type CSV struct {
	w      *bufio.Writer
	b      []byte
	header bool
	err    error
}

// NewCSV writes CSV to w; Flush writes what is buffered.
func NewCSV(w io.Writer) *CSV { return &CSV{w: bufio.NewWriterSize(w, 256<<10)} }

// errCSVIface rejects an interface name CSV cannot write on one line.
var errCSVIface = errors.New("gendb: an interface name with a quote, comma or line break cannot go in the CSV")

// Write appends recs.
func (c *CSV) Write(recs []flow.Record) error {
	if c.err != nil {
		return c.err
	}
	if !c.header {
		c.header = true
		for i, h := range CSVHeader {
			if i > 0 {
				c.b = append(c.b, ',')
			}
			c.b = append(c.b, h...)
		}
		c.b = append(c.b, '\n')
	}
	for i := range recs {
		r := &recs[i]
		c.b = appendAddr(c.b, &r.Key.SrcAddr, r.Key.IPVersion)
		c.b = append(c.b, ',')
		c.b = appendAddr(c.b, &r.Key.DstAddr, r.Key.IPVersion)
		for _, v := range [...]uint64{uint64(r.Key.SrcPort), uint64(r.Key.DstPort), uint64(r.Key.Proto), uint64(r.Key.ICMPType),
			r.Packets, r.Bytes, r.RevPackets, r.RevBytes, uint64(r.TCPFlags), uint64(r.RevTCPFlags)} {
			c.b = append(c.b, ',')
			c.b = strconv.AppendUint(c.b, v, 10)
		}
		c.b = append(c.b, ',')
		c.b = strconv.AppendInt(c.b, r.Start, 10)
		c.b = append(c.b, ',')
		c.b = strconv.AppendInt(c.b, r.End, 10)
		c.b = append(c.b, ',')
		c.b = strconv.AppendUint(c.b, uint64(r.EndReason), 10)
		c.b = append(c.b, ',')
		for j := 0; j < len(r.Iface); j++ {
			if ch := r.Iface[j]; ch == '"' || ch == ',' || ch == '\n' || ch == '\r' {
				c.err = errCSVIface
				return c.err
			}
		}
		c.b = append(c.b, r.Iface...)
		c.b = append(c.b, '\n')
		if len(c.b) >= 64<<10 {
			if _, c.err = c.w.Write(c.b); c.err != nil {
				return c.err
			}
			c.b = c.b[:0]
		}
	}
	return nil
}

// Flush writes what is buffered.
func (c *CSV) Flush() error {
	if c.err != nil {
		return c.err
	}
	if _, c.err = c.w.Write(c.b); c.err != nil {
		return c.err
	}
	c.b = c.b[:0]
	c.err = c.w.Flush()
	return c.err
}

// appendAddr appends a record address in its text form (IPv4 unmapped).
func appendAddr(b []byte, a *[16]byte, ver uint8) []byte {
	ip := netip.AddrFrom16(*a)
	if ver == 4 {
		ip = ip.Unmap()
	}
	return ip.AppendTo(b)
}

// Tee returns the function WriteStore calls with each block's records to
// write them to c too, or nil (no tee) when c is nil.
func (c *CSV) Tee() func([]flow.Record) error {
	if c == nil {
		return nil
	}
	return c.Write
}
