package store

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// partDir names one day partition under the data directory.
type partDir struct {
	iname string // the interface's directory (escaped name)
	dname string // the day's directory, YYYY-MM-DD
	day   int64
	path  string
}

// walkParts lists the day partitions of the given interfaces (every one
// when ifaces is empty), by interface directory and day. Names starting
// with '.' (tombstones, temporaries) are not partitions; a link where an
// interface or day directory goes is skipped and said once.
func (s *Store) walkParts(ifaces []string) ([]partDir, error) {
	var inames []string
	if len(ifaces) > 0 {
		for _, n := range ifaces {
			inames = append(inames, escapeIface(n))
		}
		slices.Sort(inames)
		inames = slices.Compact(inames)
	} else {
		ents, err := s.root.list()
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if strings.HasPrefix(e.name, ".") {
				continue
			}
			if e.link {
				s.skipLink(s.root.join(e.name), errLinkAt(s.root, e.name))
			}
			if e.dir {
				inames = append(inames, e.name)
			}
		}
		slices.Sort(inames)
	}
	var out []partDir
	for _, in := range inames {
		id, err := s.root.sub(in, false, 0, false)
		if err != nil {
			s.skipLink(s.root.join(in), err)
			continue
		}
		ents, _ := id.list()
		id.close()
		for _, e := range ents {
			day, ok := parseDay(e.name)
			if !ok {
				continue
			}
			path := filepath.Join(s.dir, in, e.name)
			if e.link {
				s.skipLink(path, errLinkAt(s.root, filepath.Join(in, e.name)))
				continue
			}
			if e.dir {
				out = append(out, partDir{iname: in, dname: e.name, day: day, path: path})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b partDir) int {
		return strings.Compare(a.iname+"/"+a.dname, b.iname+"/"+b.dname)
	})
	return out, nil
}

// openPartDir opens pd's directory (creating it and its interface
// directory when create is set), never through a link.
func (s *Store) openPartDir(pd partDir, create bool) (*dirH, error) {
	sync := create && !s.cfg.NoSync
	id, err := s.root.sub(pd.iname, create, s.dirPerm, sync)
	if err != nil {
		return nil, err
	}
	defer id.close()
	return id.sub(pd.dname, create, s.dirPerm, sync)
}

// errLinkAt is the ErrSymlink error for a link at rel under d.
func errLinkAt(d *dirH, rel string) error {
	return fmt.Errorf("%w: %s", ErrSymlink, d.join(rel))
}
