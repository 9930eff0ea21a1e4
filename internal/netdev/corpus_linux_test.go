//go:build linux

package netdev

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/testhost"
)

// TestWriteCorpus regenerates testdata/fuzz/FuzzParseLink from real
// rtnetlink messages of a test host: a link dump (lo, veth, bridge, an
// enslaved link) and notifications (new, bridge-port AF_BRIDGE messages,
// delete). It only runs with WEIR_NETDEV_WRITE_CORPUS=1.
func TestWriteCorpus(t *testing.T) {
	if os.Getenv("WEIR_NETDEV_WRITE_CORPUS") != "1" {
		t.Skip("set WEIR_NETDEV_WRITE_CORPUS=1 to regenerate testdata/fuzz/FuzzParseLink")
	}
	p := testhost.NewPair(t)
	simpleKind(t, p.A)
	var sub int
	if err := p.A.Do(func() (err error) {
		if sub, err = openRoute(); err != nil {
			return err
		}
		return unix.SetsockoptInt(sub, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, unix.RTNLGRP_LINK)
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sub)
	ip(t, p.A, "link", "add", "br0", "index", "20", "type", "bridge")
	addLink(t, p.A, "port0", 21, "master", "br0")
	ip(t, p.A, "link", "set", "port0", "up")
	var grams [][]byte
	if err := p.A.Do(func() error { grams = liveDatagrams(t); return nil }); err != nil {
		t.Fatal(err)
	}
	ip(t, p.A, "link", "set", "port0", "nomaster")
	ip(t, p.A, "link", "del", "port0")
	buf := make([]byte, recvBufSize)
	for {
		n, _, err := unix.Recvfrom(sub, buf, unix.MSG_DONTWAIT)
		if err != nil {
			break // EAGAIN: all read (the ip commands above have returned)
		}
		grams = append(grams, append([]byte(nil), buf[:n]...))
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzParseLink")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, g := range grams {
		sum := sha256.Sum256(g)
		name := filepath.Join(dir, "real-"+hex.EncodeToString(sum[:8]))
		if err := os.WriteFile(name, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", g), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d datagrams to %s", len(grams), dir)
}
