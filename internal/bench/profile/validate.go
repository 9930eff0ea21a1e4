package profile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrInvalid wraps every validation error.
var ErrInvalid = errors.New("invalid profile")

// Load reads a profile file: uperf XML if its first non-blank byte is '<',
// weir's YAML otherwise. vars answers uperf's $name tokens. A profile
// without a name is named after the file.
func Load(path string, vars func(string) (string, bool)) (*Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data := make([]byte, MaxFileSize+1)
	n, _ := f.Read(data)
	for n < len(data) {
		m, err := f.Read(data[n:])
		n += m
		if err != nil || m == 0 {
			break
		}
	}
	data = data[:n]
	var p *Profile
	if t := bytes.TrimLeft(data, " \t\r\n\ufeff"); len(t) > 0 && t[0] == '<' {
		p, err = ParseUperfXML(data, path, vars)
	} else {
		p, err = ParseYAML(data, path)
	}
	if err != nil {
		return nil, err
	}
	if p.Name == "" {
		p.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	return p, nil
}

// Threads returns the client threads of all groups.
func (p *Profile) Threads() int {
	n := 0
	for _, g := range p.Groups {
		n += g.Threads
	}
	return n
}

// UsesSecondary reports whether a connection uses the second network.
func (p *Profile) UsesSecondary() bool {
	for _, g := range p.Groups {
		for _, t := range g.Txns {
			for _, op := range t.Ops {
				if op.Kind == Connect && op.Net == Secondary {
					return true
				}
			}
		}
	}
	return false
}

// ClientFirst reports whether the client begins each iteration (its first
// op that is not think sends, connects or disconnects); otherwise the
// client first receives and the server begins.
func (t *Txn) ClientFirst() bool {
	for _, op := range t.Ops {
		if op.Kind != Think {
			return !op.Kind.Receives()
		}
	}
	return true
}

// Validate checks the profile against the limits and the connection rules
// (docs/bench-profiles.md) and fills defaults (Count 1, TCP). Errors name
// the group, transaction and flow op, and wrap ErrInvalid.
func (p *Profile) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
	}
	if len(p.Groups) == 0 || len(p.Groups) > MaxGroups {
		return bad("%d groups, want 1..%d", len(p.Groups), MaxGroups)
	}
	total := 0
	for gi := range p.Groups {
		g := &p.Groups[gi]
		gname := fmt.Sprintf("group %d", gi+1)
		if g.Name != "" {
			gname += " (" + g.Name + ")"
		}
		if g.Threads < 1 || g.Threads > MaxThreads {
			return bad("%s: nthreads %d, want 1..%d", gname, g.Threads, MaxThreads)
		}
		total += g.Threads
		if len(g.Txns) == 0 || len(g.Txns) > MaxTxnsPerGrp {
			return bad("%s: %d transactions, want 1..%d", gname, len(g.Txns), MaxTxnsPerGrp)
		}
		var conn Proto      // 0: not connected
		expectSend := false // a UDP connection's first data op must send
		for ti := range g.Txns {
			t := &g.Txns[ti]
			tname := fmt.Sprintf("%s, transaction %d", gname, ti+1)
			if (t.Iterations > 0) == (t.Duration > 0) {
				return bad("%s: give exactly one of iterations and duration", tname)
			}
			if t.Iterations > MaxIterations {
				return bad("%s: %d iterations, at most %d", tname, t.Iterations, MaxIterations)
			}
			if t.Duration > MaxDuration {
				return bad("%s: duration %v, at most %v", tname, t.Duration, MaxDuration)
			}
			if len(t.Ops) == 0 || len(t.Ops) > MaxOpsPerTxn {
				return bad("%s: %d flowops, want 1..%d", tname, len(t.Ops), MaxOpsPerTxn)
			}
			repeats := t.Duration > 0 || t.Iterations > 1
			start := conn
			onlyThink := true
			for oi := range t.Ops {
				op := &t.Ops[oi]
				oname := fmt.Sprintf("%s, flowop %d (%s)", tname, oi+1, op.Kind)
				if op.Kind != Think {
					onlyThink = false
				}
				switch op.Kind {
				case Connect:
					if conn != 0 {
						return bad("%s: already connected (disconnect first)", oname)
					}
					if op.Proto == 0 {
						op.Proto = TCP
					}
					if op.Proto != TCP && op.Proto != UDP {
						return bad("%s: unknown protocol", oname)
					}
					if op.Net != Primary && op.Net != Secondary {
						return bad("%s: unknown network", oname)
					}
					if op.WndSz < 0 || op.WndSz > 64<<20 {
						return bad("%s: wndsz %d, want 0..%d", oname, op.WndSz, 64<<20)
					}
					conn = op.Proto
					expectSend = conn == UDP
				case Disconnect:
					if conn == 0 {
						return bad("%s: not connected", oname)
					}
					conn, expectSend = 0, false
				case Think:
					if op.Duration <= 0 || op.Duration > MaxThink {
						return bad("%s: duration %v, want 1ns..%v", oname, op.Duration, MaxThink)
					}
				case Write, Read, SendTo, RecvFrom:
					if conn == 0 {
						return bad("%s: not connected (connect first)", oname)
					}
					if (op.Kind == SendTo || op.Kind == RecvFrom) && conn != UDP {
						return bad("%s: sendto and recvfrom need a UDP connection", oname)
					}
					if expectSend && !op.Kind.Sends() {
						return bad("%s: a UDP connection must begin with a client send (the server learns the client from its first datagram)", oname)
					}
					expectSend = false
					if op.Count == 0 {
						op.Count = 1
					}
					if op.Count < 1 || op.Count > MaxCount {
						return bad("%s: count %d, want 1..%d", oname, op.Count, MaxCount)
					}
					limit := MaxSize
					if conn == UDP {
						limit = MaxUDPSize
					}
					if op.Size < 1 || op.Size > limit {
						return bad("%s: size %d, want 1..%d", oname, op.Size, limit)
					}
					if op.Timeout < 0 || op.Timeout > MaxUDPTimeout {
						return bad("%s: timeout %v, want 0..%v", oname, op.Timeout, MaxUDPTimeout)
					}
				default:
					return bad("%s: unknown flowop", oname)
				}
			}
			if repeats && conn != start {
				return bad("%s: runs more than once but does not leave the connection as it found it (%s before, %s after)", tname, connState(start), connState(conn))
			}
			if onlyThink && t.Duration > 0 {
				return bad("%s: a duration transaction of think ops only does nothing", tname)
			}
		}
	}
	if total > MaxThreads {
		return bad("%d threads over all groups, at most %d", total, MaxThreads)
	}
	return nil
}

func connState(p Proto) string {
	if p == 0 {
		return "not connected"
	}
	return p.String() + " connected"
}

// TotalDuration is the longest group's sum of transaction durations.
func (p *Profile) TotalDuration() time.Duration {
	var most time.Duration
	for _, g := range p.Groups {
		var d time.Duration
		for _, t := range g.Txns {
			d += t.Duration
		}
		most = max(most, d)
	}
	return most
}
