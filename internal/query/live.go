package query

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/store"
	"github.com/weir-dev/weir/internal/termsafe"
)

// DefaultLiveURL is where a running `weir capture` serves the flows still
// in its tables (its default --metrics-addr).
const DefaultLiveURL = "http://127.0.0.1:9464/flows/live"

// Bounds on what FetchLive accepts from the endpoint.
const (
	maxLiveRecords = 4 << 20
	maxLiveLine    = 64 << 10
)

// LiveAuth is how FetchLive identifies itself to a capture's endpoint.
type LiveAuth struct {
	Token string      // bearer token (the capture's --api-token-file); "" sends none
	TLS   *tls.Config // for https URLs; nil trusts the system roots
}

// FetchLive reads the live flows of a running capture from its
// /flows/live endpoint (JSON lines, docs/record.md). The URL's host must be
// a loopback address: live flows never cross the network.
func FetchLive(ctx context.Context, rawURL string) ([]flow.Record, error) {
	return FetchLiveAuth(ctx, rawURL, LiveAuth{})
}

// FetchLiveAuth is FetchLive with a token and TLS settings, for a capture
// started with --api-token-file or --api-tls-cert.
func FetchLiveAuth(ctx context.Context, rawURL string, auth LiveAuth) ([]flow.Record, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("live: %q is not an http URL", rawURL)
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); (err != nil || !ip.IsLoopback()) && host != "localhost" {
		return nil, fmt.Errorf("live: %s is not a loopback address; --live reads only a capture on this host", host)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("live: %w", err)
	}
	if auth.Token != "" {
		req.Header.Set("Authorization", "Bearer "+auth.Token)
	}
	client := &http.Client{Transport: &http.Transport{
		Proxy:           nil, // never through a proxy: the capture is on this host
		DialContext:     (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		TLSClientConfig: auth.TLS,
	}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("live: no capture answering at %s (is `weir capture -i ...` running with its metrics address?): %w", u.Host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		hint := "the capture asks for its token: give --api-token-file"
		if auth.Token != "" {
			hint = "the capture refused the token of --api-token-file"
		}
		return nil, fmt.Errorf("live: %s: %s: %s", rawURL, resp.Status, hint)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("live: %s: %s %s", rawURL, resp.Status, termsafe.Message(string(b)))
	}
	return ReadRecords(resp.Body, maxLiveRecords)
}

// jsonRecord is the JSON form of flow.Record (docs/record.md).
type jsonRecord struct {
	SrcIP           netip.Addr `json:"src_ip"`
	DstIP           netip.Addr `json:"dst_ip"`
	SrcPort         uint16     `json:"src_port"`
	DstPort         uint16     `json:"dst_port"`
	Proto           uint8      `json:"proto"`
	ICMPType        uint8      `json:"icmp_type"`
	ICMPCode        uint8      `json:"icmp_code"`
	Packets         uint64     `json:"packets"`
	Bytes           uint64     `json:"bytes"`
	RevPackets      uint64     `json:"rev_packets"`
	RevBytes        uint64     `json:"rev_bytes"`
	TCPFlags        uint8      `json:"tcp_flags"`
	RevTCPFlags     uint8      `json:"rev_tcp_flags"`
	Start           time.Time  `json:"start"`
	End             time.Time  `json:"end"`
	Iface           string     `json:"iface"`
	Node            string     `json:"node"`
	VLAN            uint16     `json:"vlan"`
	DropPackets     uint64     `json:"drop_packets"`
	DropBytes       uint64     `json:"drop_bytes"`
	DropReason      string     `json:"drop_reason"`
	Sampling        uint32     `json:"sampling"`
	NATSrcIP        netip.Addr `json:"nat_src_ip"` // absent when not translated
	NATDstIP        netip.Addr `json:"nat_dst_ip"`
	NATSrcPort      uint16     `json:"nat_src_port"`
	NATDstPort      uint16     `json:"nat_dst_port"`
	Verdict         string     `json:"verdict"`
	Rule            string     `json:"rule"`
	Mark            uint32     `json:"ct_mark"`
	Zone            uint16     `json:"ct_zone"`
	SrcWorkload     string     `json:"src_workload"`
	SrcNamespace    string     `json:"src_namespace"`
	SrcNode         string     `json:"src_node"`
	DstWorkload     string     `json:"dst_workload"`
	DstNamespace    string     `json:"dst_namespace"`
	DstNode         string     `json:"dst_node"`
	Service         string     `json:"service"`
	ServiceBackends string     `json:"service_backends"`
	ServiceGroup    string     `json:"service_group"`
	ServiceMatch    string     `json:"service_match"`
}

// ReadRecords parses JSON-lines flow records (docs/record.md), at most
// limit of them; a bad line is an error naming its line number.
func ReadRecords(r io.Reader, limit int) ([]flow.Record, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxLiveLine)
	var out []flow.Record
	var in enrichInterner
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		if len(out) >= limit {
			return nil, fmt.Errorf("live: more than %d records", limit)
		}
		var j jsonRecord
		if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
			return nil, fmt.Errorf("live: line %d: %w", line, err)
		}
		if !j.SrcIP.IsValid() || !j.DstIP.IsValid() || j.SrcIP.Is4() != j.DstIP.Is4() {
			return nil, fmt.Errorf("live: line %d: src_ip and dst_ip must be addresses of one family", line)
		}
		var rec flow.Record
		rec.Key.SrcAddr, rec.Key.DstAddr = j.SrcIP.As16(), j.DstIP.As16()
		rec.Key.IPVersion = 6
		if j.SrcIP.Is4() {
			rec.Key.IPVersion = 4
		}
		rec.Key.SrcPort, rec.Key.DstPort, rec.Key.Proto = j.SrcPort, j.DstPort, j.Proto
		rec.Key.ICMPType, rec.Key.ICMPCode = j.ICMPType, j.ICMPCode
		rec.Packets, rec.Bytes, rec.RevPackets, rec.RevBytes = j.Packets, j.Bytes, j.RevPackets, j.RevBytes
		rec.TCPFlags, rec.RevTCPFlags, rec.VLAN = j.TCPFlags, j.RevTCPFlags, j.VLAN
		rec.Start, rec.End, rec.Iface, rec.Node = j.Start.UnixNano(), j.End.UnixNano(), j.Iface, j.Node
		rec.DropPackets, rec.DropBytes, rec.DropReason, rec.Sampling = j.DropPackets, j.DropBytes, j.DropReason, j.Sampling
		if j.NATSrcIP.IsValid() || j.NATDstIP.IsValid() {
			if !j.NATSrcIP.IsValid() || !j.NATDstIP.IsValid() || j.NATSrcIP.Is4() != j.SrcIP.Is4() || j.NATDstIP.Is4() != j.SrcIP.Is4() {
				return nil, fmt.Errorf("live: line %d: nat_src_ip and nat_dst_ip must be addresses of the record's family", line)
			}
			rec.PostNAT = rec.Key
			rec.PostNAT.SrcAddr, rec.PostNAT.DstAddr = j.NATSrcIP.As16(), j.NATDstIP.As16()
			rec.PostNAT.SrcPort, rec.PostNAT.DstPort = j.NATSrcPort, j.NATDstPort
		}
		v, err := flow.ParseVerdict(j.Verdict)
		if err != nil {
			return nil, fmt.Errorf("live: line %d: %w", line, err)
		}
		rec.Verdict, rec.Rule, rec.Mark, rec.Zone = v, j.Rule, j.Mark, j.Zone
		if rec.ServiceMatch, err = flow.ParseServiceMatch(j.ServiceMatch); err != nil {
			return nil, fmt.Errorf("live: line %d: %w", line, err)
		}
		rec.SrcWorkload = in.workload(j.SrcWorkload, j.SrcNamespace, j.SrcNode)
		rec.DstWorkload = in.workload(j.DstWorkload, j.DstNamespace, j.DstNode)
		rec.Service = in.service(j.Service, j.ServiceBackends, j.ServiceGroup)
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("live: %w", err)
	}
	return out, nil
}

// recordColumns turns records into one Columns per interface (of ifaces,
// when given), so live flows go through the same filter and aggregation as
// stored blocks.
func recordColumns(recs []flow.Record, ifaces []string) []store.Columns {
	by := map[string]*store.Columns{}
	var names []string
	for i := range recs {
		r := &recs[i]
		if len(ifaces) > 0 && !slices.Contains(ifaces, r.Iface) {
			continue
		}
		c := by[r.Iface]
		if c == nil {
			c = &store.Columns{Iface: r.Iface}
			by[r.Iface] = c
			names = append(names, r.Iface)
		}
		c.N++
		c.SrcAddr, c.DstAddr = append(c.SrcAddr, r.Key.SrcAddr), append(c.DstAddr, r.Key.DstAddr)
		c.IPVersion = append(c.IPVersion, r.Key.IPVersion)
		c.SrcPort, c.DstPort = append(c.SrcPort, r.Key.SrcPort), append(c.DstPort, r.Key.DstPort)
		c.Proto = append(c.Proto, r.Key.Proto)
		c.ICMPType, c.ICMPCode = append(c.ICMPType, r.Key.ICMPType), append(c.ICMPCode, r.Key.ICMPCode)
		c.Packets, c.Bytes = append(c.Packets, r.Packets), append(c.Bytes, r.Bytes)
		c.RevPackets, c.RevBytes = append(c.RevPackets, r.RevPackets), append(c.RevBytes, r.RevBytes)
		c.TCPFlags, c.RevTCPFlags = append(c.TCPFlags, r.TCPFlags), append(c.RevTCPFlags, r.RevTCPFlags)
		c.EndReason = append(c.EndReason, uint8(r.EndReason))
		c.VLAN = append(c.VLAN, r.VLAN)
		c.Start, c.End = append(c.Start, r.Start), append(c.End, r.End)
		c.DropPackets, c.DropBytes = append(c.DropPackets, r.DropPackets), append(c.DropBytes, r.DropBytes)
		c.DropReason, c.Sampling = append(c.DropReason, r.DropReason), append(c.Sampling, r.Sampling)
		n := &r.PostNAT
		c.NATSrcAddr, c.NATDstAddr, c.NATVersion = append(c.NATSrcAddr, n.SrcAddr), append(c.NATDstAddr, n.DstAddr), append(c.NATVersion, n.IPVersion)
		c.NATSrcPort, c.NATDstPort = append(c.NATSrcPort, n.SrcPort), append(c.NATDstPort, n.DstPort)
		c.Verdict, c.Rule = append(c.Verdict, uint8(r.Verdict)), append(c.Rule, r.Rule)
		c.Mark, c.Zone = append(c.Mark, r.Mark), append(c.Zone, r.Zone)
		c.SrcWorkload, c.DstWorkload = append(c.SrcWorkload, r.SrcWorkload), append(c.DstWorkload, r.DstWorkload)
		c.Service, c.ServiceMatch = append(c.Service, r.Service), append(c.ServiceMatch, uint8(r.ServiceMatch))
		c.Node = append(c.Node, r.Node)
	}
	out := make([]store.Columns, 0, len(names))
	for _, n := range names {
		out = append(out, *by[n])
	}
	return out
}

// LiveSnapshot fetches the live records from url together with a list of
// the store's blocks from the same moment. The live records include those
// the capture has emitted but not yet written out; a writeout between
// listing and fetching would count its records twice, or not at all, so
// the blocks are listed before and after the fetch and the fetch repeated
// (up to 5 times) until no block was committed in between.
func LiveSnapshot(ctx context.Context, s *store.Store, url string) ([]flow.Record, []store.BlockInfo, error) {
	return LiveSnapshotFunc(ctx, s, func(ctx context.Context) ([]flow.Record, error) { return FetchLive(ctx, url) })
}

// LiveSnapshotFunc is LiveSnapshot with the live records from fetch (a
// capture's own tables, or another capture's endpoint).
func LiveSnapshotFunc(ctx context.Context, s *store.Store, fetch func(context.Context) ([]flow.Record, error)) ([]flow.Record, []store.BlockInfo, error) {
	for range 5 {
		before, err := s.Blocks(0, 0, nil)
		if err != nil {
			return nil, nil, err
		}
		recs, err := fetch(ctx)
		if err != nil {
			return nil, nil, err
		}
		after, err := s.Blocks(0, 0, nil)
		if err != nil {
			return nil, nil, err
		}
		if sameBlocks(before, after) {
			if after == nil {
				after = []store.BlockInfo{} // an empty store: nil would mean "list them"
			}
			return recs, after, nil
		}
	}
	return nil, nil, errors.New("live: the store kept committing blocks while the live flows were fetched; try again")
}

func sameBlocks(a, b []store.BlockInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Iface != b[i].Iface || a[i].Day != b[i].Day || a[i].Offset != b[i].Offset {
			return false
		}
	}
	return true
}

// enrichInterner shares one workload or service among the records that
// name the same one, as enrichment does.
type enrichInterner struct {
	wl  map[flow.Workload]*flow.Workload
	svc map[flow.Service]*flow.Service
}

// workload is the shared workload of these strings, nil if all are "".
func (in *enrichInterner) workload(name, ns, node string) *flow.Workload {
	w := flow.Workload{Name: name, Namespace: ns, Node: node}
	if w == (flow.Workload{}) {
		return nil
	}
	if in.wl == nil {
		in.wl = map[flow.Workload]*flow.Workload{}
	}
	p := in.wl[w]
	if p == nil {
		p = &w
		in.wl[w] = p
	}
	return p
}

// service is the shared service of these strings, nil if all are "".
func (in *enrichInterner) service(name, backends, group string) *flow.Service {
	s := flow.Service{Name: name, Backends: backends, Group: group}
	if s == (flow.Service{}) {
		return nil
	}
	if in.svc == nil {
		in.svc = map[flow.Service]*flow.Service{}
	}
	p := in.svc[s]
	if p == nil {
		p = &s
		in.svc[s] = p
	}
	return p
}

// LiveFetcher is FetchLiveAuth of url and auth as a function, for
// LiveSnapshotFunc.
func LiveFetcher(url string, auth LiveAuth) func(context.Context) ([]flow.Record, error) {
	return func(ctx context.Context) ([]flow.Record, error) { return FetchLiveAuth(ctx, url, auth) }
}
