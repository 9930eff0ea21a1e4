package profile

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// uperf's XML, as uperf and the Ripsaw operator's templates write it:
//
//	<?xml version=1.0?>
//	<profile name="stream">
//	  <group nthreads="$nthr">
//	    <transaction iterations="1"><flowop type="connect" options="remotehost=$h protocol=tcp"/></transaction>
//	    <transaction duration="30s"><flowop type=write options="count=16 size=16384"/></transaction>
//	    <transaction iterations="1"><flowop type=disconnect /></transaction>
//	  </group>
//	</profile>
//
// Unquoted attribute values and the unquoted version are not XML; uperf
// accepts them, so weir reads the file in encoding/xml's non-strict mode.

type xProfile struct {
	XMLName xml.Name `xml:"profile"`
	Name    string   `xml:"name,attr"`
	Groups  []xGroup `xml:"group"`
}

type xGroup struct {
	NThreads string `xml:"nthreads,attr"`
	NProcs   string `xml:"nprocs,attr"`
	Txns     []xTxn `xml:"transaction"`
}

type xTxn struct {
	Iterations string `xml:"iterations,attr"`
	Duration   string `xml:"duration,attr"`
	Rate       string `xml:"rate,attr"`
	Ops        []xOp  `xml:"flowop"`
}

type xOp struct {
	Type    string `xml:"type,attr"`
	Options string `xml:"options,attr"`
}

// xmlIgnored are uperf options weir accepts and ignores: weir chooses the
// server and its ports itself, and the rest tune uperf's own engine.
var xmlIgnored = map[string]bool{
	"remotehost": true, "port": true, "engine": true, "canfail": true, "non_blocking": true,
	"conn": true, "encaps": true, "srcaddr": true,
}

// xmlKeys are the options each op reads.
var xmlKeys = map[OpKind][]string{
	Connect:  {"protocol", "tcp_nodelay", "wndsz", "family", "network"},
	Write:    {"size", "count"},
	Read:     {"size", "rsize", "count", "timeout"},
	SendTo:   {"size", "count"},
	RecvFrom: {"size", "rsize", "count", "timeout"},
	Think:    {"duration", "idle"},
}

// ParseUperfXML reads a uperf XML profile as uperf does: $name tokens are
// replaced from vars (an unknown one is an error, except in remotehost=,
// which weir ignores), unquoted attribute values are accepted, and so are
// the flowops and options listed in docs/bench-profiles.md. The profile is
// validated.
func ParseUperfXML(data []byte, name string, vars func(string) (string, bool)) (*Profile, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: %d bytes, at most %d", name, len(data), MaxFileSize)
	}
	var x xProfile
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = false
	d.CharsetReader = func(label string, r io.Reader) (io.Reader, error) {
		if strings.EqualFold(label, "utf-8") || strings.EqualFold(label, "us-ascii") || strings.EqualFold(label, "iso-8859-1") {
			return r, nil
		}
		return nil, fmt.Errorf("encoding %q: want UTF-8", label)
	}
	if err := d.Decode(&x); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p, err := fromXML(&x, vars)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

func fromXML(x *xProfile, vars func(string) (string, bool)) (*Profile, error) {
	p := &Profile{}
	var err error
	if p.Name, err = expand(x.Name, vars); err != nil {
		return nil, fmt.Errorf("profile name: %w", err)
	}
	if len(x.Groups) == 0 {
		return nil, errors.New("no <group>")
	}
	for gi, xg := range x.Groups {
		where := fmt.Sprintf("group %d", gi+1)
		n := xg.NThreads
		if n == "" {
			n = xg.NProcs // weir runs processes' threads as threads
		}
		if n, err = expand(n, vars); err != nil {
			return nil, fmt.Errorf("%s: nthreads: %w", where, err)
		}
		g := Group{}
		if g.Threads, err = ParseCount(n); err != nil {
			return nil, fmt.Errorf("%s: nthreads %w", where, err)
		}
		for ti, xt := range xg.Txns {
			t, err := txnFromXML(&xt, vars)
			if err != nil {
				return nil, fmt.Errorf("%s, transaction %d: %w", where, ti+1, err)
			}
			g.Txns = append(g.Txns, t)
		}
		p.Groups = append(p.Groups, g)
	}
	return p, nil
}

func txnFromXML(xt *xTxn, vars func(string) (string, bool)) (Txn, error) {
	var t Txn
	if xt.Rate != "" {
		return t, errors.New("rate= is not supported: weir runs transactions as fast as they go")
	}
	it, err := expand(xt.Iterations, vars)
	if err != nil {
		return t, err
	}
	du, err := expand(xt.Duration, vars)
	if err != nil {
		return t, err
	}
	if (it == "") == (du == "") {
		return t, errors.New("give exactly one of iterations= and duration=")
	}
	if it != "" {
		if t.Iterations, err = ParseCount(it); err != nil {
			return t, fmt.Errorf("iterations %w", err)
		}
	} else if t.Duration, err = ParseDuration(du); err != nil {
		return t, err
	}
	for oi, xo := range xt.Ops {
		kind := strings.ToLower(strings.TrimSpace(xo.Type))
		if kind == "nop" {
			continue // uperf's no-op
		}
		k, ok := kindByName[kind]
		if !ok {
			if kind == "accept" {
				return t, fmt.Errorf("flowop %d: accept is the server's side; weir mirrors the client's profile on the server", oi+1)
			}
			return t, fmt.Errorf("flowop %d: type %q is not supported (connect, accept, disconnect, read, write, sendto, recvfrom, think, nop)", oi+1, xo.Type)
		}
		op, err := opFromXML(k, xo.Options, vars)
		if err != nil {
			return t, fmt.Errorf("flowop %d (%s): %w", oi+1, kind, err)
		}
		t.Ops = append(t.Ops, op)
	}
	return t, nil
}

func opFromXML(k OpKind, options string, vars func(string) (string, bool)) (Op, error) {
	op := Op{Kind: k, Count: 1}
	if k == Connect {
		op.Proto = TCP
	}
	seen := map[string]bool{}
	for _, f := range strings.Fields(options) {
		key, val, hasVal := strings.Cut(f, "=")
		key = strings.ToLower(key)
		if xmlIgnored[key] {
			continue
		}
		if !contains(xmlKeys[k], key) {
			return op, fmt.Errorf("option %q is not supported here", key)
		}
		if seen[key] {
			return op, fmt.Errorf("option %q given twice", key)
		}
		seen[key] = true
		v, err := expand(val, vars)
		if err != nil {
			return op, err
		}
		switch key {
		case "tcp_nodelay":
			op.NoDelay = true
			continue
		case "idle":
			op.Idle = true
			continue
		}
		if !hasVal {
			return op, fmt.Errorf("option %q needs a value", key)
		}
		switch key {
		case "protocol":
			op.Proto, err = protoByName(v)
		case "family":
			op.IPv6, err = familyByName(v)
		case "network":
			op.Net, err = networkByName(v)
		case "wndsz":
			op.WndSz, err = ParseSize(v)
		case "size", "rsize":
			op.Size, err = ParseSize(v)
		case "count":
			op.Count, err = ParseCount(v)
		case "duration":
			op.Duration, err = ParseDuration(v)
		case "timeout":
			op.Timeout, err = ParseDuration(v)
		}
		if err != nil {
			return op, err
		}
	}
	if k != Connect && k != Disconnect && k != Think && op.Size == 0 && !seen["size"] && !seen["rsize"] {
		return op, errors.New("size= is required")
	}
	return op, nil
}
