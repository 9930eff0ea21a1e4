// Package result is the record of one weir bench run: what ran (profile,
// options, host facts, weir version), what it measured (transactions, flow
// operations, interfaces, CPU) and, when asked, how weir's capture and the
// reference tools saw the same traffic. It is the JSON file `weir bench run
// --json` writes and `weir bench compare` reads, so its field names are a
// format: add fields, never rename them (Schema says which shape a file
// has).
package result

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/weir-dev/weir/internal/bench/profile"
)

// Schema is the version of the file format this package writes.
const Schema = 1

// Run is one benchmark run.
type Run struct {
	Schema      int              `json:"schema"`
	WeirVersion string           `json:"weir_version"`
	Started     time.Time        `json:"started"`
	Elapsed     Duration         `json:"elapsed_ns"` // traffic phase, first connect to last disconnect
	ProfileFile string           `json:"profile_file,omitempty"`
	Profile     *profile.Profile `json:"profile"`
	Options     Options          `json:"options"`
	Host        HostFacts        `json:"host"`

	Txns      []TxnStats   `json:"transactions"`
	Ops       []OpStats    `json:"flowops"`
	NICs      []NICStats   `json:"nics"`
	CPU       []SideCPU    `json:"cpu"`
	Intervals []Interval   `json:"intervals"` // traffic over time, all threads
	Conns     []ConnStats  `json:"connections,omitempty"`
	Observe   []Observed   `json:"observe,omitempty"`
	Calibrate *Calibration `json:"calibrate,omitempty"`
	Errors    []string     `json:"errors,omitempty"` // what went wrong but did not stop the run
}

// Duration is a time.Duration written as integer nanoseconds.
type Duration = time.Duration

// Options are the run's settings besides the profile.
type Options struct {
	Pairs     int      `json:"pairs"`               // client/server pairs
	Hub       string   `json:"hub"`                 // "bridge" or "router": how the primary network joins the hosts
	Secondary bool     `json:"secondary,omitempty"` // a second network was built
	Offloads  bool     `json:"offloads"`            // segmentation offloads (TSO/GSO/GRO) left on
	MTU       int      `json:"mtu"`
	Observe   []string `json:"observe,omitempty"` // capture modes run beside the traffic
	Strict    bool     `json:"strict,omitempty"`
	Calibrate bool     `json:"calibrate,omitempty"`
}

// HostFacts describe the machine the run used.
type HostFacts struct {
	Hostname   string `json:"hostname"`
	Kernel     string `json:"kernel"`
	CPUModel   string `json:"cpu_model"`
	CPUs       int    `json:"cpus"`
	MemBytes   uint64 `json:"mem_bytes"`
	GoVersion  string `json:"go_version"`
	GOMAXPROCS int    `json:"gomaxprocs"`
}

// Latency summarises one operation's (or transaction's) latencies. Avg,
// Min and Max are exact; P50 and P99 come from a log-linear histogram and
// are within 1% of the true value.
type Latency struct {
	Count uint64   `json:"count"`
	Avg   Duration `json:"avg_ns"`
	P50   Duration `json:"p50_ns"`
	P99   Duration `json:"p99_ns"`
	Min   Duration `json:"min_ns"`
	Max   Duration `json:"max_ns"`
}

// TxnStats is one transaction of one group, over all its threads and pairs.
type TxnStats struct {
	Group       int      `json:"group"`
	GroupName   string   `json:"group_name,omitempty"`
	Txn         int      `json:"txn"`
	Name        string   `json:"name,omitempty"`
	Latency     Latency  `json:"latency"` // one sample per iteration
	Bytes       uint64   `json:"bytes"`   // payload both ways
	Wall        Duration `json:"wall_ns"` // first thread's start to last thread's end
	BytesPerSec float64  `json:"bytes_per_sec"`
	OpsPerSec   float64  `json:"ops_per_sec"` // iterations per second
}

// OpStats is one flow operation of one transaction, over all threads and
// pairs; one latency sample per call (a count=16 write is 16 samples).
type OpStats struct {
	Group       int     `json:"group"`
	Txn         int     `json:"txn"`
	Op          int     `json:"op"`
	Kind        string  `json:"kind"`
	Proto       string  `json:"proto,omitempty"`
	Size        int     `json:"size,omitempty"`
	Latency     Latency `json:"latency"`
	Bytes       uint64  `json:"bytes"`
	Lost        uint64  `json:"lost,omitempty"` // UDP receives that timed out
	BytesPerSec float64 `json:"bytes_per_sec"`
	OpsPerSec   float64 `json:"ops_per_sec"`
}

// NICStats are one interface's kernel counters over the traffic phase.
type NICStats struct {
	Host      string  `json:"host"` // "server", "client1", ...
	Iface     string  `json:"iface"`
	Net       string  `json:"net"` // "primary" or "secondary"
	RxPackets uint64  `json:"rx_packets"`
	TxPackets uint64  `json:"tx_packets"`
	RxBytes   uint64  `json:"rx_bytes"` // as the kernel counts them (Ethernet header included)
	TxBytes   uint64  `json:"tx_bytes"`
	RxDrops   uint64  `json:"rx_drops,omitempty"`
	TxDrops   uint64  `json:"tx_drops,omitempty"`
	RxPktsPS  float64 `json:"rx_pkts_per_sec"`
	TxPktsPS  float64 `json:"tx_pkts_per_sec"`
	RxBitsPS  float64 `json:"rx_bits_per_sec"`
	TxBitsPS  float64 `json:"tx_bits_per_sec"`
}

// SideCPU is the CPU time one side's processes used.
type SideCPU struct {
	Side    string   `json:"side"` // "server" or "clients"
	User    Duration `json:"user_ns"`
	System  Duration `json:"system_ns"`
	Percent float64  `json:"percent"` // of one core over the traffic phase
}

// Interval is the payload moved (both ways, all threads) in one slice of
// the traffic phase; compare uses their spread as a run's own noise.
type Interval struct {
	Start Duration `json:"start_ns"` // from the traffic phase's start
	Len   Duration `json:"len_ns"`
	Bytes uint64   `json:"bytes"`
	Iters uint64   `json:"iterations"`
}

// ConnStats is one data connection as the driver and the kernel saw it, in
// the client's orientation (Fwd: client to server).
type ConnStats struct {
	Pair    int    `json:"pair"`
	Group   int    `json:"group"`
	Thread  int    `json:"thread"`
	Proto   string `json:"proto"`
	Client  string `json:"client"` // addr:port
	Server  string `json:"server"`
	Net     string `json:"net"`
	FwdData uint64 `json:"fwd_payload"` // payload bytes the client sent
	RevData uint64 `json:"rev_payload"` // payload bytes the server sent
	// Kernel's view (TCP_INFO after the close handshake; UDP: the
	// datagrams each side's driver handed to the kernel).
	FwdPkts     uint64 `json:"fwd_pkts"`
	RevPkts     uint64 `json:"rev_pkts"`
	FwdIPBytes  uint64 `json:"fwd_ip_bytes"` // expected IP bytes (see docs/bench.md)
	RevIPBytes  uint64 `json:"rev_ip_bytes"`
	Retransmits uint64 `json:"retransmits,omitempty"`
	Exact       bool   `json:"exact"` // the expected IP packets and bytes are exact
}

// Observed is what one capture mode recorded against what was sent.
type Observed struct {
	Mode      string   `json:"mode"`  // afpacket, ebpf, conntrack
	Where     string   `json:"where"` // host and interface
	Conns     int      `json:"conns"`
	Matched   int      `json:"matched"`
	Diffs     []string `json:"diffs,omitempty"` // one line per difference
	NICPkts   uint64   `json:"nic_pkts"`        // the interface counters, both ways
	SeenPkts  uint64   `json:"seen_pkts"`       // what the records sum to, both ways
	NICBytes  uint64   `json:"nic_ip_bytes"`
	SeenBytes uint64   `json:"seen_ip_bytes"`
	OK        bool     `json:"ok"`
}

// Calibration is what the reference tools measured on the same hosts.
type Calibration struct {
	Iperf3   *Iperf3   `json:"iperf3,omitempty"`
	Sockperf *Sockperf `json:"sockperf,omitempty"`
	Errors   []string  `json:"errors,omitempty"`
}

// Iperf3 is one iperf3 TCP stream test and weir's driver doing the same.
type Iperf3 struct {
	Duration       Duration `json:"duration_ns"`
	Streams        int      `json:"streams"`
	WriteSize      int      `json:"write_size"`
	BitsPerSec     float64  `json:"bits_per_sec"` // iperf3's receiver figure
	Retransmits    uint64   `json:"retransmits"`
	WeirBitsPerSec float64  `json:"weir_bits_per_sec"`
	Ratio          float64  `json:"ratio"` // weir / iperf3
}

// Sockperf is one sockperf ping-pong test and weir's driver doing the same.
// Latencies are round trips (sockperf prints half of them; they are doubled
// here so both columns mean the same thing).
type Sockperf struct {
	Duration   Duration `json:"duration_ns"`
	Proto      string   `json:"proto"`
	MsgSize    int      `json:"msg_size"`
	AvgRTT     Duration `json:"avg_rtt_ns"`
	P50RTT     Duration `json:"p50_rtt_ns"`
	P99RTT     Duration `json:"p99_rtt_ns"`
	WeirAvgRTT Duration `json:"weir_avg_rtt_ns"`
	WeirP50RTT Duration `json:"weir_p50_rtt_ns"`
	WeirP99RTT Duration `json:"weir_p99_rtt_ns"`
	Ratio      float64  `json:"ratio"` // weir avg / sockperf avg
}

// MaxFileSize bounds the result files Read accepts.
const MaxFileSize = 64 << 20

// Write writes r as indented JSON.
func (r *Run) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Read decodes a result file, refusing files larger than MaxFileSize, of
// another schema or without a profile.
func Read(rd io.Reader) (*Run, error) {
	data, err := io.ReadAll(io.LimitReader(rd, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("result: larger than %d bytes", MaxFileSize)
	}
	var r Run
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("result: schema %d, this weir reads %d", r.Schema, Schema)
	}
	if r.Profile == nil {
		return nil, fmt.Errorf("result: no profile")
	}
	return &r, nil
}

// ReadFile reads the result file at path (Read).
func ReadFile(path string) (*Run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}

// WriteFile writes the run as JSON to the file at path (created, or
// truncated).
func (r *Run) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := r.Write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
