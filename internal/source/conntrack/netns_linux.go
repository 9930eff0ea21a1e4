//go:build linux

package conntrack

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// netnsDir is where ip netns add bind-mounts named namespaces.
const netnsDir = "/run/netns"

// maxNetnsNames bounds the /run/netns entries looked at for a name.
const maxNetnsNames = 4096

// IdentifyNetns returns the namespace that run runs its function in
// (nil run: the caller's), with its /run/netns name if it has one.
func IdentifyNetns(run func(fn func() error) error) (Netns, error) {
	var n Netns
	get := func() error {
		// The thread's own namespace: /proc/self would name the
		// process leader's.
		var st unix.Stat_t
		if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
			return fmt.Errorf("conntrack: reading the network namespace: %w", err)
		}
		n.Inode, n.Dev = st.Ino, st.Dev
		return nil
	}
	var err error
	if run != nil {
		err = run(get)
	} else {
		runtime.LockOSThread()
		err = get()
		runtime.UnlockOSThread()
	}
	if err != nil {
		return Netns{}, err
	}
	var st unix.Stat_t
	if unix.Stat("/proc/1/ns/net", &st) == nil {
		n.Initial = st.Ino == n.Inode && st.Dev == n.Dev
	}
	n.Name = netnsName(n)
	return n, nil
}

// netnsName returns the name of the /run/netns file that is a bind
// mount of namespace n, or "". Lstat: a symbolic link there is not
// followed.
func netnsName(n Netns) string {
	d, err := os.Open(netnsDir)
	if err != nil {
		return ""
	}
	defer d.Close()
	names, _ := d.Readdirnames(maxNetnsNames)
	for _, name := range names {
		var st unix.Stat_t
		if unix.Lstat(netnsDir+"/"+name, &st) == nil && st.Ino == n.Inode && st.Dev == n.Dev {
			return name
		}
	}
	return ""
}

// tracking finds out whether conntrack tracks anything in the namespace:
// a namespace where no rule needs conntrack (no ct expression, NAT or
// stateful match) has no conntrack hook, and its table stays empty
// whatever crosses it. The evidence: TCP connections established in the
// namespace, or TCP and UDP packets crossing it (local or forwarded),
// while the table stays empty. The kernel's per-namespace SNMP counters
// tell both; the files are opened in the namespace and read again by
// offset, one read per poll until the table shows an entry.
type tracking struct {
	snmp, snmp6 *os.File // nil: not available (the check is off, or IPv6 is)
	base        uint64   // TCP/UDP packets when the source opened
	buf         []byte
	tracked     bool // the table held an entry: conntrack works here

	packets, established uint64 // at the last snap
	err                  error
}

// trackingPackets is how many TCP/UDP packets must cross an empty table
// before weir says conntrack tracks nothing: a few, so that a packet
// counted before its entry was made is no evidence.
const trackingPackets = 16

// openTracking opens the namespace's SNMP counters (in run's namespace).
func openTracking(run func(fn func() error) error) *tracking {
	t := &tracking{buf: make([]byte, 8192)}
	open := func() error {
		var err error
		if t.snmp, err = os.Open("/proc/thread-self/net/snmp"); err != nil {
			return err
		}
		t.snmp6, _ = os.Open("/proc/thread-self/net/snmp6") // absent without IPv6
		return nil
	}
	var err error
	if run != nil {
		err = run(open)
	} else {
		runtime.LockOSThread()
		err = open()
		runtime.UnlockOSThread()
	}
	if err != nil {
		return nil
	}
	t.base, _, _ = t.read()
	return t
}

// close closes the files.
func (t *tracking) close() {
	if t == nil {
		return
	}
	t.snmp.Close()
	if t.snmp6 != nil {
		t.snmp6.Close()
	}
}

// read returns the TCP segments and UDP datagrams the namespace sent,
// received and forwarded so far, and its established TCP connections.
func (t *tracking) read() (packets, established uint64, err error) {
	n, err := t.snmp.ReadAt(t.buf, 0)
	if n == 0 {
		return 0, 0, errors.Join(errors.New("conntrack: empty /proc/net/snmp"), err)
	}
	v4 := t.buf[:n]
	for _, f := range [...]struct{ sect, name string }{
		{"Tcp", "InSegs"}, {"Tcp", "OutSegs"}, {"Udp", "InDatagrams"}, {"Udp", "OutDatagrams"}, {"Ip", "ForwDatagrams"},
	} {
		packets += snmpValue(v4, f.sect, f.name)
	}
	established = snmpValue(v4, "Tcp", "CurrEstab")
	if t.snmp6 != nil {
		if n, _ := t.snmp6.ReadAt(t.buf, 0); n > 0 {
			v6 := t.buf[:n]
			for _, name := range [...]string{"Udp6InDatagrams", "Udp6OutDatagrams", "Ip6OutForwDatagrams"} {
				packets += snmp6Value(v6, name)
			}
		}
	}
	return packets, established, nil
}

// snmpValue finds a counter in /proc/net/snmp's layout: a header line
// "Sect: Name1 Name2 ..." followed by a value line "Sect: v1 v2 ...".
// Missing or malformed: 0.
func snmpValue(b []byte, sect, name string) uint64 {
	prefix := []byte(sect + ":")
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte("\n"))
		if !bytes.HasPrefix(line, prefix) {
			continue
		}
		vals, _, _ := bytes.Cut(b, []byte("\n"))
		names, values := bytes.Fields(line[len(prefix):]), bytes.Fields(bytes.TrimPrefix(vals, prefix))
		for i, n := range names {
			if string(n) == name && i < len(values) {
				v, _ := strconv.ParseUint(string(values[i]), 10, 64)
				return v
			}
		}
		return 0
	}
	return 0
}

// snmp6Value finds a counter in /proc/net/snmp6's layout: "Name value"
// lines. Missing or malformed: 0.
func snmp6Value(b []byte, name string) uint64 {
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte("\n"))
		f := bytes.Fields(line)
		if len(f) == 2 && string(f[0]) == name {
			v, _ := strconv.ParseUint(string(f[1]), 10, 64)
			return v
		}
	}
	return 0
}

// snap reads the counters just before a dump, so that every packet they
// count crossed before the dump began: its entry, if conntrack made one,
// is in the dump (or was seen as an event).
func (t *tracking) snap() {
	if t == nil || t.tracked {
		return
	}
	t.packets, t.established, t.err = t.read()
}

// check takes the outcome of the dump after snap (entries listed,
// connections the store ever saw) and returns whether conntrack
// evidently tracks nothing here, with the evidence.
func (t *tracking) check(entries int, seen uint64) (untracked bool, packets, established uint64) {
	if t == nil {
		return false, 0, 0
	}
	if entries > 0 || seen > 0 {
		t.tracked = true
	}
	if t.tracked || t.err != nil {
		return false, 0, 0
	}
	packets = t.packets - min(t.packets, t.base)
	return t.established > 0 || packets >= trackingPackets, packets, t.established
}
