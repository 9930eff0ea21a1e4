package store

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestNewerBlockNotRepaired: a block whose header checks out but names a
// format newer than this weir's is reported as written by a newer weir,
// its records are not read, and a repair leaves its partition as it is
// (cutting it away would lose records the newer weir can read).
func TestNewerBlockNotRepaired(t *testing.T) {
	f := newDamageFixture(t)
	e := f.x.entries[1]
	b := slices.Clone(f.dataB)
	b[e.off+12] = blockVersion + 1
	hl := int64(binary.LittleEndian.Uint32(b[e.off+8:]))
	binary.LittleEndian.PutUint32(b[e.off+hl-4:], crc32.Checksum(b[e.off:e.off+hl-4], castagnoli))
	if err := os.WriteFile(f.data, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var lines []string
	rep, err := Check(f.dir, CheckOptions{Problem: func(d Damage) {
		if !d.Newer() {
			t.Errorf("a newer block's problem is not Newer: %s", d)
		}
		if l := d.String(); strings.Contains(l, "lost") || !strings.Contains(l, strconv.Itoa(e.rows)+" records not read here") {
			t.Errorf("a newer block's line says its records are lost, or not how many: %s", l)
		}
		lines = append(lines, d.String())
	}})
	if err != nil {
		t.Fatal(err)
	}
	var sum strings.Builder
	rep.WriteSummary(&sum, f.dir, false)
	if s := sum.String(); !strings.Contains(s, "1 blocks (") || !strings.Contains(s, "written by a newer weir: not read") ||
		strings.Contains(s, "lost") || strings.Contains(s, "--repair") {
		t.Errorf("summary says the newer block is damage, or to repair it:\n%s", s)
	}
	if rep.DamagedBlocks != 0 || rep.NewerBlocks != 1 || rep.NewerRows != int64(e.rows) || !strings.Contains(strings.Join(lines, "\n"), newerWhy+" (block format "+strconv.Itoa(blockVersion+1)+"; this weir reads up to "+strconv.Itoa(blockVersion)+")") {
		t.Fatalf("report %+v\n%s", rep, strings.Join(lines, "\n"))
	}
	var acts []string
	rep, err = Check(f.dir, CheckOptions{Repair: true, Action: func(a string) { acts = append(acts, a) }})
	if err != nil || rep.Repaired != 0 || len(acts) != 1 || !strings.Contains(acts[0], "blocks a newer weir wrote") {
		t.Fatalf("repair %v, %+v, %q", err, rep, acts)
	}
	after, err := os.ReadFile(f.data)
	if err != nil || !bytes.Equal(after, b) {
		t.Fatalf("the repair changed the data file (%v)", err)
	}
	if after, _ := os.ReadFile(f.idx); !bytes.Equal(after, f.idxB) {
		t.Fatal("the repair changed the index")
	}
}
