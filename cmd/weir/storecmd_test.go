package main

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/store"
)

// smallStore writes three blocks of rows rows each to interface eth0 and
// returns the data directory and the block file.
func smallStore(t *testing.T, rows int) (dir, data string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "data")
	s, err := store.Open(store.Config{Dir: dir, NoSync: true, Writeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for b := range 3 {
		recs := make([]flow.Record, rows)
		for i := range recs {
			a := netip.AddrFrom4([4]byte{10, 0, byte(b), byte(i)}).As16()
			recs[i] = flow.Record{Key: flow.Key{SrcAddr: a, DstAddr: a, SrcPort: 1000, DstPort: 443, Proto: 6, IPVersion: 4},
				Packets: 1, Bytes: 100, Start: t0 + int64(b*rows+i), End: t0 + int64(b*rows+i) + 1e6, Iface: "eth0"}
		}
		s.Write(recs)
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, filepath.Join(dir, "eth0", "2025-03-01", "blocks")
}

// TestStoreCheck: 'weir store check' finds a block whose header a bit
// flip damaged (file, offset, records lost) and exits 1; --repair keeps
// the other two blocks (also the one after the damage) and a second check
// exits 0; --repair refuses while a capture holds the store.
func TestStoreCheck(t *testing.T) {
	dir, data := smallStore(t, 50)
	code, out, errs := runCLI("store", "check", "--data-dir", dir)
	if code != exitOK || !strings.Contains(out, "1 partitions: 3 blocks intact (150 records)") {
		t.Fatalf("clean store: exit %d\n%s%s", code, out, errs)
	}
	b, _ := os.ReadFile(data)
	second := int64(binary.LittleEndian.Uint32(b[4:8])) // the first block's length: the second starts there
	b[second+30] ^= 0x08
	os.WriteFile(data, b, 0o600)
	code, out, _ = runCLI("store", "check", "-d", dir)
	want := fmt.Sprintf("damaged: %s offset %d (", data, second)
	if code != exitFailure || !strings.Contains(out, want) || !strings.Contains(out, "header checksum mismatch; 50 records lost") ||
		!strings.Contains(out, "2 blocks intact (100 records); 1 blocks damaged (50 records lost)") || !strings.Contains(out, "--repair") {
		t.Fatalf("damaged store: exit %d\n%s\nwant %q", code, out, want)
	}
	s, err := store.Open(store.Config{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	code, _, errs = runCLI("store", "check", "--repair", "-d", dir)
	s.Close()
	if code != exitFailure || !strings.Contains(errs, "a capture is writing to "+dir) {
		t.Fatalf("repair beside a writer: exit %d: %s", code, errs)
	}
	code, out, _ = runCLI("store", "check", "--repair", "-d", dir)
	if code != exitFailure || !strings.Contains(out, "repaired: repaired "+filepath.Dir(data)+": kept 2 intact blocks (100 records); removed 1 damaged blocks (50 records)") {
		t.Fatalf("repair: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI("store", "check", "-d", dir)
	if code != exitOK || !strings.Contains(out, "2 blocks intact (100 records)") {
		t.Fatalf("after repair: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI("query", "-d", dir, "-o", "csv", "proto")
	if code != exitOK || !strings.Contains(out, "6,100,") {
		t.Fatalf("query after repair: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"store"}, {"store", "nope"}, {"store", "check", "--nope"}} {
		if code, _, _ := runCLI(args...); code != exitUsage {
			t.Errorf("weir %q: exit %d", args, code)
		}
	}
	if code, _, errs := runCLI("store", "check", "-d", filepath.Join(dir, "nothing")); code != exitFailure || !strings.Contains(errs, "no flow store") {
		t.Errorf("missing store: exit %d: %s", code, errs)
	}
}

// TestQuerySaysDamage: a query over a store with a block damaged in its
// header (skipped when listing) or cut off says on stderr which file,
// which offset and how many records its answer leaves out, and counts
// them in blocks_corrupt.
func TestQuerySaysDamage(t *testing.T) {
	dir, data := smallStore(t, 40)
	b, _ := os.ReadFile(data)
	second := int64(binary.LittleEndian.Uint32(b[4:8]))
	b[second+20] ^= 0x01
	third := second + int64(binary.LittleEndian.Uint32(b[second+4:second+8]))
	os.WriteFile(data, b[:third+60], 0o600) // and the third cut off
	code, out, errs := runCLI("query", "-d", dir, "-o", "json", "proto")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, w := range []string{
		"2 damaged blocks were skipped",
		fmt.Sprintf("%s offset %d", data, second), "40 records lost",
		fmt.Sprintf("%s offset %d", data, third), "past the end of the file",
	} {
		if !strings.Contains(errs, w) {
			t.Fatalf("stderr lacks %q:\n%s", w, errs)
		}
	}
	if !strings.Contains(out, `"blocks_corrupt": 2`) && !strings.Contains(out, `"blocks_corrupt":2`) {
		t.Fatalf("blocks_corrupt not 2:\n%s", out)
	}
}

// TestStoreStats: 'weir store stats' prints the rows and blocks and a
// line for each stored column, none for the omitted ones, and fails with
// a hint when there is no store.
func TestStoreStats(t *testing.T) {
	dir, _ := smallStore(t, 50)
	code, out, errs := runCLI("store", "stats", "-d", dir)
	if code != exitOK || !strings.Contains(out, "150 rows in 3 blocks") || !strings.Contains(out, "SrcAddr") ||
		!strings.Contains(out, "headers") || strings.Contains(out, "DropReason") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := runCLI("store", "stats", "-d", filepath.Join(dir, "nothing")); code != exitFailure || !strings.Contains(errs, "no flow store") {
		t.Errorf("missing store: exit %d, %s", code, errs)
	}
}
