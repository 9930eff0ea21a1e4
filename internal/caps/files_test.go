package caps

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReachable: what decides whether weir keeps cap_dac_override.
func TestReachable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make files of another user")
	}
	dir := t.TempDir()
	mk := func(name string, mode os.FileMode, uid int, isDir bool) string {
		p := filepath.Join(dir, name)
		var err error
		if isDir {
			err = os.Mkdir(p, mode)
		} else {
			err = os.WriteFile(p, []byte("x"), mode)
		}
		if err == nil {
			err = os.Chmod(p, mode)
		}
		if err == nil {
			err = os.Chown(p, uid, uid)
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	mine := mk("mine", 0o700, 0, true)
	mk("mine/part", 0o700, 65534, true) // a partition an earlier run of another user made
	theirs := mk("theirs", 0o755, 65534, true)
	for _, c := range []struct {
		path string
		dir  bool
		want bool
	}{
		{mk("own.yaml", 0o600, 0, false), false, true},
		{mk("other.yaml", 0o600, 65534, false), false, false},
		{mk("world.yaml", 0o644, 65534, false), false, true},
		{mine, true, false},
		{mk("store", 0o700, 0, true), true, true},
		{filepath.Join(dir, "not-yet"), true, true},
		{theirs, true, false},
		{mk("theirs/in", 0o777, 0, true), true, true},
		{mk("locked", 0o700, 65534, true) + "/data", true, false}, // an ancestor weir cannot search
	} {
		if got := Reachable(c.path, c.dir); got != c.want {
			t.Errorf("Reachable(%s) = %v, want %v", strings.TrimPrefix(c.path, dir), got, c.want)
		}
	}
}
