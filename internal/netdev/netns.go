package netdev

import (
	"path/filepath"
	"strings"
)

// NetnsPath returns the file of a named network namespace: name itself if
// it is a path, else /run/netns/name (where `ip netns add` puts them).
func NetnsPath(name string) string {
	if strings.ContainsRune(name, '/') {
		return name
	}
	return filepath.Join("/run/netns", name)
}
